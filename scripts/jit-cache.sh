#!/usr/bin/env bash
# jit-cache.sh: carry the CUDA driver's JIT cache from one GPU lease to the next.
#
# The kernels ship as PTX (kernels/*.ptx, compute_90); the driver compiles each module to SASS
# the first time a process loads it and keeps the result in its JIT cache ($CUDA_CACHE_PATH, by
# default ~/.nv/ComputeCache). On a fresh GPU machine that compile is paid once per lease:
# session 38 (H100, driver 580.159.04) measured ~110 s for the CUDA test binary's first start
# with the cache disabled against 1 s warm, and a campaign's first worker spent 44 s in its
# warmup against 3-4 s for the next ones. The cache is the driver's own output, so a restored
# entry is the code a fresh compile would give on that driver; the driver keys entries by the
# PTX, the compile options, its own version and the GPU's architecture, so an entry made by
# another driver or for other PTX is simply not used (and the module is compiled again).
#
# On the GPU machine, from the repository root:
#
#   bash scripts/jit-cache.sh restore        # carry/jit-cache.tar.xz -> the cache, when the
#                                            # cache is empty (a fresh machine); else nothing
#   bash scripts/jit-cache.sh save DIR       # the cache -> DIR/jit-cache.tar.xz, when it holds
#                                            # more files than restore found (~3 MB packed)
#
# Here, put a returned jit-cache.tar.xz in carry/ (ignored) and carry it with the binaries:
# carry ["carry/bins.tar.xz", "carry/jit-cache.tar.xz"]. scripts/h200-lib.sh's h200_unpack and
# scripts/device-campaign.sh call `restore` themselves.
#
# Exit status: 0 done (including nothing to do), 2 bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
cache=${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}
archive=carry/jit-cache.tar.xz
mark=$cache/../.horizon-jit-cache-restored

files() { find "$cache" -type f 2>/dev/null | wc -l; }

case "${1:-}" in
restore)
	if [ ! -f "$archive" ]; then
		echo "jit-cache: no $archive; the driver compiles the kernels on first use"
		exit 0
	fi
	if [ "$(files)" -gt 0 ]; then
		echo "jit-cache: $cache already holds $(files) files (a warm machine); kept"
		exit 0
	fi
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/../.jit-restore.XXXXXX")
	if ! tar -xJf "$archive" -C "$tmp"; then
		rm -rf "$tmp"
		echo "jit-cache: $archive does not unpack; the driver compiles the kernels on first use" >&2
		exit 0
	fi
	# the archive holds one folder (the cache's own name); its contents become the cache
	src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
	if [ -z "$src" ]; then
		rm -rf "$tmp"
		echo "jit-cache: $archive holds no cache folder; ignored" >&2
		exit 0
	fi
	cp -a "$src/." "$cache/"
	rm -rf "$tmp"
	files >"$mark"
	echo "jit-cache: restored $(files) files into $cache"
	;;
save)
	dir=${2:-}
	if [ -z "$dir" ]; then
		echo "usage: bash scripts/jit-cache.sh save DIR" >&2
		exit 2
	fi
	now=$(files)
	before=$(cat "$mark" 2>/dev/null || echo 0)
	if [ "$now" -eq 0 ] || [ "$now" -le "$before" ]; then
		echo "jit-cache: $now files, $before restored: nothing new to save"
		exit 0
	fi
	mkdir -p "$dir"
	tar -cJf "$dir/jit-cache.tar.xz.tmp" -C "$(dirname "$cache")" "$(basename "$cache")" &&
		mv "$dir/jit-cache.tar.xz.tmp" "$dir/jit-cache.tar.xz"
	echo "jit-cache: saved $now files ($before restored) to $dir/jit-cache.tar.xz ($(stat -c %s "$dir/jit-cache.tar.xz") bytes)"
	;;
*)
	sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && exit 0
	exit 2
	;;
esac
