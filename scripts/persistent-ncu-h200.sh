#!/usr/bin/env bash
# persistent-ncu-h200.sh: why a persistent-kernel unit runs slower than the
# same block of the launched kernel (issue 14). One device call: an INT4
# artifact of the OLMoE-1B-7B shape (seed 924) in /dev/shm, one generate in
# graph-full and one in persistent steps (decode rate, VRAM readings), then
# Nsight Compute on one persistent step (the third decode_persistent launch
# of a 4-token generate): duration, DRAM bytes, local-memory traffic,
# registers, occupancy and warp stall reasons. Build as for
# persistent-h200.sh (carry/horizon-bench-cuda, packed as carry/bins.tar.xz).
#
#   bash scripts/persistent-ncu-h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/persistent-ncu}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
bin=carry/horizon-bench-cuda
art=/dev/shm/persistent/olmoe-1b-7b-924-int4
if [ ! -f "$art/artifact.json" ]; then
	t0=$SECONDS
	"$bin" synth --arch olmoe-1b-7b --seed 924 --out /dev/shm/persistent/ckpt >"$OUT/synth.log" 2>&1 &&
		"$bin" prepare --checkpoint /dev/shm/persistent/ckpt --out "$art" >"$OUT/prepare.log" 2>&1
	echo "artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	rm -rf /dev/shm/persistent/ckpt
fi
prompt="The quick brown fox jumps over the lazy dog."
for mode in graph-full persistent; do
	t0=$SECONDS
	"$bin" generate --device cuda --artifact "$art" --executor grouped-v1 --step-mode "$mode" --prompt "$prompt" \
		--tokens 64 --json >"$OUT/gen-$mode.json" 2>"$OUT/gen-$mode.err"
	echo "generate $mode: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	python3 - "$OUT/gen-$mode.json" <<'PY' | tee -a "$summary"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    keep = {k: v for k, v in d.items() if not isinstance(v, list)}
    print(json.dumps(keep, sort_keys=True)[:1500])
except Exception as e:
    print(f"no result ({e})")
PY
done
t0=$SECONDS
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,lts__t_bytes.sum,smsp__inst_executed.sum
timeout 300 ncu --kernel-name decode_persistent --launch-skip 2 --launch-count 1 --clock-control none --cache-control none \
	--metrics "$metrics" --section WarpStateStats --section SchedulerStats --csv --page details \
	"$bin" generate --device cuda --artifact "$art" --executor grouped-v1 --step-mode persistent --prompt "Hi" --tokens 4 \
	>"$OUT/ncu-persistent.csv" 2>"$OUT/ncu-persistent.err"
echo "ncu persistent: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
python3 - "$OUT/ncu-persistent.csv" <<'PY' | tee -a "$summary"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = None
for r in rows:
    if "Metric Name" in r:
        hdr = r
        continue
    if hdr and len(r) == len(hdr):
        d = dict(zip(hdr, r))
        print(f"{d.get('Section Name','')[:22]:22s} {d['Metric Name'][:60]:60s} {d.get('Metric Unit',''):12s} {d['Metric Value']}")
PY
exit 0
