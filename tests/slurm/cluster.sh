#!/usr/bin/env bash
# A throw-away single-node SLURM cluster on this machine, for the workflow's SLURM test.
#
#   tests/slurm/cluster.sh install              install Debian's slurm-wlm and munge when missing
#   tests/slurm/cluster.sh start STATE [PORT]   write STATE/slurm.conf, start munged, slurmctld, slurmd
#   tests/slurm/cluster.sh stop STATE           cancel this cluster's jobs, stop its three daemons
#
# Everything lives in the folder STATE (configuration, spool, state, logs, munge key and socket), so
# the cluster touches nothing of the machine's own SLURM or munge set-up. Clients find it through
# SLURM_CONF=STATE/slurm.conf and STATE/bin first on PATH (`start` writes both lines to STATE/env). The controller listens on PORT
# and slurmd on PORT+1 (default 6817, SLURM's own default).
#
# Known to work with Debian 12's SLURM 22.05 run as root: proctrack/linuxproc and task/none (no
# cgroups needed), select/cons_tres with CPUs and memory as consumable resources, no accounting
# database; finished jobs are recorded by jobcomp/filetxt in STATE/jobcomp.log, one line per job
# with its partition, time limit, CPU count and TRES (memory), and its state (COMPLETED, TIMEOUT, ...).
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

# die with the last lines of a daemon's log
die_log() {
    local log=$1
    shift
    echo "cluster.sh: $* (last lines of $log:)" >&2
    tail -n 5 "$log" >&2 2>/dev/null || true
    exit 1
}

install_packages() {
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} and not root: cannot install them"
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    echo "cluster.sh: installing slurm-wlm munge (missing: ${missing[*]})" >&2
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2 \
        || die "apt-get install slurm-wlm munge failed"
}

# Seconds to wait for a condition, checked every half second.
wait_for() {
    local seconds=$1
    shift
    local i
    for ((i = 0; i < seconds * 2; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

node_idle() {
    sinfo --noheader --nodes=localnode --format=%t | grep -q -E '^(idle|mix|alloc)'
}

start() {
    local state=$1 port=${2:-6817}
    [ -n "$state" ] || die "usage: cluster.sh start STATE [PORT]"
    install_packages
    mkdir -p "$state"
    state=$(cd "$state" && pwd)
    [ ! -e "$state/slurmctld.pid" ] || die "$state already holds a started cluster (run stop first)"
    mkdir -p "$state/munge" "$state/ctld" "$state/spool" "$state/log"
    chmod 755 "$state/munge"

    # munge: a private key and socket.
    dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$state/munge/munge.key"
    # --force: the state folder may sit under a world-writable /tmp, which munged would refuse.
    munged --force --key-file="$state/munge/munge.key" --socket="$state/munge/munge.socket" \
        --pid-file="$state/munge/munged.pid" --log-file="$state/log/munged.log" \
        --seed-file="$state/munge/munged.seed" || die_log "$state/log/munged.log" "munged did not start"
    wait_for 10 munge -n -S "$state/munge/munge.socket" || die_log "$state/log/munged.log" "munged does not answer"

    local host cpus mem_kb mem_mb
    host=$(hostname -s)
    cpus=$(nproc)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem_mb=$((mem_kb / 1024 * 9 / 10)) # leave the OS a tenth
    cat >"$state/slurm.conf" <<EOF
# Single-node test cluster written by tests/slurm/cluster.sh.
ClusterName=featlearn
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
PlugStackConfig=$state/plugstack.conf
MpiDefault=none
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/jobcomp.log
# Finished jobs stay visible to squeue and scontrol for an hour: the executor plugin polls squeue
# for job states, and the test reads the controller's job records after the run.
MinJobAge=3600
# A job past its time limit gets SIGTERM, and SIGKILL KillWait seconds later (SLURM's default is 30). slurmctld
# looks for jobs past their limit every 30 seconds, so a job with a 1-minute limit ends 60 to 90 s after it starts.
KillWait=5
OverTimeLimit=0
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
# One stand-in GPU (a generic resource with a count and no device file): jobs that ask for a GPU are
# scheduled and recorded as on a GPU node, and run on the CPU (PyTorch finds no CUDA device).
GresTypes=gpu
NodeName=localnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
# Two partitions on the one node, named as in profiles/slurm (and a third, short, below). The cpu partition
# is GPU-less by rule: job_submit.lua (read from this file's folder) refuses a job that asks it for a GPU, so
# a GPU job sent to the cpu partition fails at submission, as on a cluster whose cpu nodes have no GPU.
PartitionName=cpu Nodes=localnode Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localnode Default=NO MaxTime=INFINITE State=UP
# A partition with a 1-minute time limit: the test of a training longer than its partition allows, which is
# killed at the limit, resubmitted and resumed from its checkpoint.
PartitionName=short Nodes=localnode Default=NO MaxTime=1 State=UP
JobSubmitPlugins=lua
EOF
    cat >"$state/job_submit.lua" <<'EOF'
function slurm_job_submit(job_desc, part_list, submit_uid)
   local asked = (job_desc.tres_per_job or "") .. (job_desc.tres_per_node or "") ..
      (job_desc.tres_per_task or "") .. (job_desc.tres_per_socket or "")
   local partition = job_desc.partition or "cpu"
   if string.find(partition, "cpu") and string.find(asked, "gpu") then
      slurm.log_user("partition cpu has no GPU")
      return slurm.ERROR
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
EOF
    echo "NodeName=localnode Name=gpu File=/dev/null" >"$state/gres.conf"
    : >"$state/plugstack.conf"
    # Snakemake's job-step plugin removes every SLURM_* variable, SLURM_CONF included, before the
    # srun it runs inside a job; on a real cluster that srun finds /etc/slurm/slurm.conf. Here an
    # srun on PATH (STATE/bin, put first by the caller) points it at this cluster's file instead.
    mkdir -p "$state/bin"
    printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$state/slurm.conf" "$(command -v srun)" >"$state/bin/srun"
    chmod 755 "$state/bin/srun"
    printf 'SLURM_CONF=%s\nPATH=%s:$PATH\n' "$state/slurm.conf" "$state/bin" >"$state/env"
    export SLURM_CONF="$state/slurm.conf"

    slurmctld -i || die_log "$state/log/slurmctld.log" "slurmctld did not start"
    wait_for 20 scontrol ping || die_log "$state/log/slurmctld.log" "slurmctld does not answer"
    slurmd -N localnode || die_log "$state/log/slurmd.log" "slurmd did not start"
    wait_for 30 node_idle || die_log "$state/log/slurmctld.log" "node localnode is not idle: $(sinfo -N 2>&1)"
    echo "cluster.sh: started; export SLURM_CONF=$state/slurm.conf" >&2
}

# Stop the daemon whose pid is in FILE (a process this script started), waiting up to 10 s.
stop_pidfile() {
    local file=$1 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill "$pid" 2>/dev/null; then
        wait_for 10 bash -c "! kill -0 $pid" || kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

stop() {
    local state=$1
    [ -n "$state" ] || die "usage: cluster.sh stop STATE"
    [ -d "$state" ] || return 0
    state=$(cd "$state" && pwd)
    export SLURM_CONF="$state/slurm.conf"
    if [ -s "$state/slurmctld.pid" ]; then
        # Cancel this cluster's jobs and let slurmd clean up their steps before it stops.
        scancel --full --partition=cpu,gpu,short 2>/dev/null || true
        wait_for 20 bash -c '[ -z "$(squeue --noheader --states=PENDING,RUNNING,COMPLETING 2>/dev/null)" ]' || true
    fi
    stop_pidfile "$state/slurmd.pid"
    stop_pidfile "$state/slurmctld.pid"
    stop_pidfile "$state/munge/munged.pid"
    rm -f "$state/munge/munge.socket" "$state/munge/munge.socket.lock"
    echo "cluster.sh: stopped" >&2
}

case "${1:-}" in
install) install_packages ;;
start) start "${2:-}" "${3:-}" ;;
stop) stop "${2:-}" ;;
*) die "usage: cluster.sh install | start STATE [PORT] | stop STATE" ;;
esac
