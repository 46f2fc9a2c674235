#!/usr/bin/env bash
# gen.sh: compile every kernels/*.cu (or the .cu files named as arguments)
# to PTX for compute_90 (`make kernels`; sm_90 for griddepcontrol).
#
# Each .ptx starts with one comment line naming the SHA-256 of its .cu source
# and of every local header the .cu includes:
#
#   // horizon-kernel-sources: matvec_f16.cu sha256=<hex> common.cuh sha256=<hex>
#
# kernels_test.go recomputes those hashes without nvcc, so CI fails when a
# source changed and its PTX was not regenerated.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-compute_90}
[ $# -gt 0 ] || set -- *.cu
for cu in "$@"; do
	base=${cu%.cu}
	line="// horizon-kernel-sources: $cu sha256=$(sha256sum "$cu" | cut -d' ' -f1)"
	for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$cu"); do
		line="$line $h sha256=$(sha256sum "$h" | cut -d' ' -f1)"
	done
	tmp=$(mktemp)
	"$NVCC" -ptx -std=c++17 -arch="$ARCH" -O3 -o "$tmp" "$cu"
	{ echo "$line"; cat "$tmp"; } >"$base.ptx"
	rm -f "$tmp"
	echo "kernels: $cu -> $base.ptx"
done
