#!/usr/bin/env bash
# session 21, call A: finish fidelity-v1 with the 2f94b69 binaries that journaled 4 of its 6 workers.
# carry: carry/s21 carry/s21-fid carry/state (not carry/bins.tar.xz: the 64 MiB limit)
set -u
tar -xJf carry/s21-fid/fidelity-bins-2f94b69.tar.xz -C carry/s21-fid
sha256sum carry/s21-fid/horizon-bench-cuda | tee $OUT/summary.txt
bash scripts/device-campaign.sh fidelity --bin carry/s21-fid/horizon-bench-cuda --verify carry/s21-fid/horizon-verify \
	--budget 585 --reserve 200 --artifact-cache /dev/shm/horizon-artifacts --checkpoint-scratch /tmp/horizon-scratch > $OUT/dcA.txt 2>&1
echo "device-campaign fidelity: rc=$?" | tee -a $OUT/summary.txt
tail -6 $OUT/dcA.txt >> $OUT/summary.txt
