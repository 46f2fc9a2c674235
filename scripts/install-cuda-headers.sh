#!/usr/bin/env bash
# Installs what building Horizon's CUDA parts needs on a Debian 12 (bookworm) machine with no GPU.
#
#   scripts/install-cuda-headers.sh toolkit   # nvcc 11.8 + cuda.h + stub libcuda (make kernels, make cuda)
#   scripts/install-cuda-headers.sh headers   # only cuda.h + stub libcuda.so, extracted into
#                                             # $CUDA_DEPS (default bin/cuda-deps/, ignored) without installing
#                                             # the package (make cuda-vet; suits CI)
#
# Debian ships CUDA in the contrib and non-free components, which the default sources do not
# list; the script adds them (a deb822 file next to debian.sources, same URIs and key).
set -euo pipefail

mode=${1:-toolkit}
deps=${CUDA_DEPS:-bin/cuda-deps}
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi

add_components() {
	local f=/etc/apt/sources.list.d/debian-contrib-nonfree.sources
	if [ -f "$f" ]; then return; fi
	$sudo tee "$f" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	$sudo apt-get update
}

case "$mode" in
toolkit)
	if command -v nvcc >/dev/null 2>&1; then
		echo "nvcc already installed: $(command -v nvcc)"
		exit 0
	fi
	add_components
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends nvidia-cuda-toolkit
	nvcc --version
	;;
headers)
	if [ -f "$deps/include/cuda.h" ] && [ -f "$deps/lib/libcuda.so" ]; then
		echo "cuda.h and stub libcuda already in $deps"
		exit 0
	fi
	add_components
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download nvidia-cuda-dev)
	dpkg-deb -x "$tmp"/nvidia-cuda-dev_*.deb "$tmp/x"
	mkdir -p "$deps/include" "$deps/lib"
	cp "$(find "$tmp/x" -name cuda.h -path '*include*' | head -1)" "$deps/include/"
	cp "$(find "$tmp/x" -name libcuda.so -path '*stubs*' | head -1)" "$deps/lib/"
	echo "cuda.h and stub libcuda.so in $deps"
	;;
*)
	echo "usage: $0 [toolkit|headers]" >&2
	exit 2
	;;
esac
