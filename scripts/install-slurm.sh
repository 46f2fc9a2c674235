#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm: slurmctld, slurmd and the client
# commands sbatch, squeue, sacct, scancel) and MUNGE, what `make test-slurm`
# runs a one-node cluster with, on a Debian 12 (bookworm) machine. Already
# installed: nothing to do. It needs root (or sudo) and the Debian mirror; it
# fails loudly when it has neither, it never skips.
#
# The packages' maintainer scripts try to start their services; the test
# starts its own daemons with its own configuration, so the script keeps
# invoke-rc.d from starting any (policy-rc.d, for the length of the install
# only, when the machine has none).
set -euo pipefail

need=()
for cmd in sbatch squeue sacct scancel slurmctld slurmd; do
	command -v "$cmd" >/dev/null 2>&1 || need=(slurm-wlm)
done
command -v munged >/dev/null 2>&1 || need+=(munge)
if [ ${#need[@]} -eq 0 ]; then
	echo "install-slurm: slurm-wlm $(dpkg-query -W -f='${Version}' slurm-wlm 2>/dev/null || echo '(not from dpkg)') and munge already installed"
	exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
		echo "install-slurm: ${need[*]} missing and neither root nor password-less sudo to install them;" \
			"install slurm-wlm and munge (apt-get install slurm-wlm munge) and run again" >&2
		exit 1
	fi
	sudo="sudo -n"
fi

policy=/usr/sbin/policy-rc.d
added_policy=""
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 755 "$policy"
	added_policy=1
fi
cleanup() { if [ -n "$added_policy" ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

echo "install-slurm: installing ${need[*]} (apt-get)"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
dpkg-query -W slurm-wlm munge
command -v munged
