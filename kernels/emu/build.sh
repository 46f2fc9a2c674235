#!/usr/bin/env bash
# build.sh: compile the emulator harness against kernels/*.cu (or the .cu
# files of another directory: KDIR=... bash build.sh) into $OUT (default
# /tmp/horizon-emu/harness), and the tensor-core matmul's check (mmtc.cpp,
# needs no cases) next to it as mmtc, the decode experts' (tcd.cpp) as tcd,
# the prefill attention's (pa.cpp) as pa, the decode attention's (as.cpp, step.cuh's
# attention_split_t: the plain loop, the pipe and the ring) as as, chain.cu's (ch.cpp) as ch,
# prefill_rows.cu's warp top-k (tk.cpp) as tk.
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
g++ "${flags[@]}" -include cuda_emu.h -x c++ -c "$KDIR/matmul_tc.cu" -o "$tmp/matmul_tc.o" &
g++ "${flags[@]}" -c "$here/mmtc.cpp" -o "$tmp/mmtc.o" &
g++ "${flags[@]}" -include cuda_emu.h -x c++ -c "$KDIR/experts_tc.cu" -o "$tmp/experts_tc.o" &
g++ "${flags[@]}" -c "$here/tcd.cpp" -o "$tmp/tcd.o" &
g++ "${flags[@]}" -include cuda_emu.h -x c++ -c "$KDIR/prefill_attention.cu" -o "$tmp/prefill_attention.o" &
g++ "${flags[@]}" -c "$here/pa.cpp" -o "$tmp/pa.o" &
g++ "${flags[@]}" -c "$here/as.cpp" -o "$tmp/as.o" &
g++ "${flags[@]}" -c "$here/ch.cpp" -o "$tmp/ch.o" &
g++ "${flags[@]}" -include cuda_emu.h -x c++ -c "$KDIR/prefill_rows.cu" -o "$tmp/prefill_rows.o" &
g++ "${flags[@]}" -c "$here/tk.cpp" -o "$tmp/tk.o" &
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$tmp/emu.o" &
g++ "${flags[@]}" -c "${HARNESS:-$here/harness.cpp}" -o "$tmp/harness.o" &
wait
g++ -o "$OUT" "${objs[@]}" "$tmp/emu.o" "$tmp/harness.o"
g++ -o "$(dirname "$OUT")/mmtc" "$tmp/matmul_tc.o" "$tmp/emu.o" "$tmp/mmtc.o"
g++ -o "$(dirname "$OUT")/tcd" "$tmp/experts_tc.o" "$tmp/emu.o" "$tmp/tcd.o"
g++ -o "$(dirname "$OUT")/pa" "$tmp/prefill_attention.o" "$tmp/emu.o" "$tmp/pa.o"
g++ -o "$(dirname "$OUT")/as" "$tmp/emu.o" "$tmp/as.o"
g++ -o "$(dirname "$OUT")/ch" "$tmp/emu.o" "$tmp/ch.o"
g++ -o "$(dirname "$OUT")/tk" "$tmp/prefill_rows.o" "$tmp/emu.o" "$tmp/tk.o"
rm -rf "$tmp"
echo "built $OUT, $(dirname "$OUT")/mmtc (matmul_tc.cu's check, mmtc.cpp) $(dirname "$OUT")/tcd (experts_tc.cu's, tcd.cpp), $(dirname "$OUT")/pa (prefill_attention.cu's, pa.cpp) $(dirname "$OUT")/as (the decode attention's, as.cpp), $(dirname "$OUT")/ch (chain.cu's, ch.cpp) and $(dirname "$OUT")/tk (prefill_rows.cu's warp top-k, tk.cpp)"
