#!/usr/bin/env bash
# build.sh: compile the emulator harness against kernels/*.cu (or the .cu
# files of another directory: KDIR=... bash build.sh) into $OUT (default
# /tmp/horizon-emu/harness).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KDIR=${KDIR:-$here/..}
OUT=${OUT:-/tmp/horizon-emu/harness}
mkdir -p "$(dirname "$OUT")"
flags=(-std=c++17 -O2 -g -ffp-contract=off -fno-fast-math -fno-strict-aliasing -I"$here/include")
objs=()
tmp=$(mktemp -d)
for k in matvec_f16 matvec_w4a16 experts_grouped elementwise; do
	g++ "${flags[@]}" -include cuda_emu.h -x c++ -c "$KDIR/$k.cu" -o "$tmp/$k.o" &
	objs+=("$tmp/$k.o")
done
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$tmp/emu.o" &
g++ "${flags[@]}" -c "${HARNESS:-$here/harness.cpp}" -o "$tmp/harness.o" &
wait
g++ -o "$OUT" "${objs[@]}" "$tmp/emu.o" "$tmp/harness.o"
rm -rf "$tmp"
echo "built $OUT"
