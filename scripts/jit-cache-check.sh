#!/usr/bin/env bash
# jit-cache-check.sh: what scripts/jit-cache.sh promises, checked without a GPU (`make
# jit-cache-check`, part of `make test`), in a temporary copy of the script's tree layout:
# restore fills an empty cache from carry/jit-cache.tar.xz and leaves a non-empty one alone, a
# missing or broken archive changes nothing and exits 0, save writes an archive only when the
# cache holds more files than restore put there, and bad usage exits 2.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "jit-cache-check: FAIL: $*" >&2; exit 1; }
mkdir -p "$t/repo/scripts" "$t/repo/carry" "$t/src/ComputeCache/a" "$t/home"
cp "$here/scripts/jit-cache.sh" "$t/repo/scripts/"
echo index >"$t/src/ComputeCache/index"
echo entry >"$t/src/ComputeCache/a/entry"
tar -cJf "$t/repo/carry/jit-cache.tar.xz" -C "$t/src" ComputeCache
js() { CUDA_CACHE_PATH="$t/home/nv/ComputeCache" bash "$t/repo/scripts/jit-cache.sh" "$@"; }
cache=$t/home/nv/ComputeCache

js restore >/dev/null || fail "restore exited $?"
[ "$(cat "$cache/a/entry" 2>/dev/null)" = entry ] && [ -f "$cache/index" ] || fail "restore did not unpack the archive into the cache"
echo changed >"$cache/index"
js restore >/dev/null || fail "a second restore exited $?"
[ "$(cat "$cache/index")" = changed ] || fail "restore overwrote a cache that already held files"

js save "$t/out" >/dev/null || fail "save exited $?"
[ ! -e "$t/out/jit-cache.tar.xz" ] || fail "save wrote an archive although the cache did not grow"
echo new >"$cache/a/new"
js save "$t/out" >/dev/null || fail "save exited $?"
tar -tJf "$t/out/jit-cache.tar.xz" 2>/dev/null | grep -q "ComputeCache/a/new" || fail "save did not pack the grown cache"
[ ! -e "$t/out/jit-cache.tar.xz.tmp" ] || fail "save left its temporary file"

rm -rf "$t/home"
echo garbage >"$t/repo/carry/jit-cache.tar.xz"
js restore >/dev/null 2>&1 || fail "restore of a broken archive exited $? (want 0: the driver compiles instead)"
[ -z "$(find "$cache" -type f 2>/dev/null)" ] || fail "restore of a broken archive left files in the cache"
rm "$t/repo/carry/jit-cache.tar.xz"
js restore >/dev/null || fail "restore without an archive exited $?"

js save >/dev/null 2>&1
[ $? -eq 2 ] || fail "save without DIR: want exit 2"
js bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown command: want exit 2"
js --help >/dev/null || fail "--help exited $?"
echo "jit-cache-check: ok"
