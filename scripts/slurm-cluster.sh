#!/usr/bin/env bash
# A one-node Slurm cluster for tests, on this machine, in a directory of its own:
#
#   source scripts/slurm-cluster.sh; slurm_cluster_start DIR; ...; slurm_cluster_stop
#
# slurm_cluster_start writes DIR/slurm.conf (localhost, this machine's cores,
# no GPU), a fresh MUNGE key, and starts munged, slurmctld and slurmd with
# their sockets, state, spool, pid and log files all under DIR; it exports
# SLURM_CONF so that sbatch, squeue, sacct and scancel talk to that cluster,
# and waits until the node is idle. Nothing goes to /etc or /run. It needs
# root (the daemons run as root: SlurmUser=root) and Debian's slurm-wlm and
# munge (scripts/install-slurm.sh). slurm_cluster_stop stops exactly the
# daemons it started (by their pid files). Ports: SLURM_TEST_PORT (default
# 16817) for slurmctld, the next one for slurmd.

slurm_cluster_start() {
	local dir=$1 port=${SLURM_TEST_PORT:-16817}
	mkdir -p "$dir"/{munge,state,spool,log}
	chmod 700 "$dir" "$dir/munge"
	SLURM_CLUSTER_DIR=$(cd "$dir" && pwd)
	dir=$SLURM_CLUSTER_DIR
	dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
	chmod 400 "$dir/munge/munge.key"
	munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
		--pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"

	local host cpus mem
	host=$(hostname -s)
	cpus=$(nproc)
	mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
	cat >"$dir/slurm.conf" <<CONF
# One-node test cluster (scripts/slurm-cluster.sh): $host, $cpus cores, no GPU.
ClusterName=horizon-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
# Finished jobs stay known to squeue --states=all for 10 minutes: a re-run
# reads the state of the tasks it adopts there (no accounting here).
MinJobAge=600
SchedulerParameters=sched_interval=1
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
	export SLURM_CONF=$dir/slurm.conf
	slurmctld -f "$SLURM_CONF"
	slurmd -f "$SLURM_CONF"
	local i
	for i in $(seq 1 60); do
		if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
			echo "slurm-cluster: $host idle ($cpus CPUs) under $dir"
			return 0
		fi
		sleep 1
	done
	echo "slurm-cluster: the node did not come up in 60 s; logs:" >&2
	tail -n 20 "$dir"/log/*.log >&2
	return 1
}

slurm_cluster_stop() {
	local dir=${SLURM_CLUSTER_DIR:-}
	[ -n "$dir" ] || return 0
	local f pid
	for f in slurmd.pid slurmctld.pid munge/munged.pid; do
		[ -f "$dir/$f" ] || continue
		pid=$(cat "$dir/$f")
		if kill "$pid" 2>/dev/null; then
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
	done
	echo "slurm-cluster: stopped the daemons under $dir"
	SLURM_CLUSTER_DIR=
}
