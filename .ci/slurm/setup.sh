#!/usr/bin/env bash
# A single-node SLURM cluster with a fake GPU, for CI (tests/test_slurm.py).
#
#   sudo .ci/slurm/setup.sh            # install, configure, start; waits until the node is idle
#
# What it does (idempotent: a second run checks and returns in about a second):
#   1. apt-get installs Debian's slurmctld slurmd slurm-client munge (--no-install-recommends),
#      with services kept from auto-starting during the install;
#   2. writes /etc/slurm/slurm.conf and /etc/slurm/gres.conf (job steps lose SLURM_CONF, so the
#      config must sit at the default path). The node is this machine as `slurmd -C` sees it,
#      plus SLURM_CI_GPUS (default 1) fake GPUs: gres.conf File= must name a character device
#      (a regular file is rejected, a missing File= drains the node), so we mknod c 195 N;
#   3. starts munged, slurmctld and slurmd (systemd units when systemd is PID 1, else the
#      daemons directly), restarting them when the configuration changed;
#   4. cancels the jobs still queued or running (left from a killed test session: see cancel_leftovers);
#   5. waits until `sinfo` shows the node idle, resuming it once if it was drained.
#
# Test-cluster facts baked in: no slurmdbd (accounting_storage/none: `sacct` fails, so the
# Snakemake profile must use `slurm-status-command: squeue`); MinJobAge=3600 keeps finished jobs
# visible to squeue and `scontrol show job`; DefMemPerCPU is set, otherwise a job without --mem
# takes the whole node; a job past its --mem is killed by slurmd (jobacct_gather/linux with OverMemoryKill,
# RSS sampled every second: no cgroups needed), state OUT_OF_MEMORY, as a real cluster's OOM kill.
# Logs: /var/log/slurm/{slurmctld,slurmd}.log.
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$0" "$@"
    fi
    echo "setup.sh: must run as root (or with sudo available)" >&2
    exit 1
fi

GPUS="${SLURM_CI_GPUS:-1}"
PARTITION="${SLURM_CI_PARTITION:-ci}"
WAIT_S="${SLURM_CI_WAIT_S:-60}"
PACKAGES=(slurmctld slurmd slurm-client munge)
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm

log() { echo "[slurm-ci] $*" >&2; }
die() {
    log "ERROR: $*"
    for f in "${LOG_DIR}/slurmctld.log" "${LOG_DIR}/slurmd.log" /var/log/munge/munged.log; do
        [[ -f $f ]] && { echo "--- tail $f" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}

# ---------------------------------------------------------------------------------------------
install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    log "installing ${missing[*]}"
    # Keep the packages' postinst from starting daemons before the config exists.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    fi
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends)
    if ! "${apt[@]}" "${missing[@]}" >/tmp/slurm-ci-apt.log 2>&1; then
        apt-get update -q >>/tmp/slurm-ci-apt.log 2>&1 || true
        "${apt[@]}" "${missing[@]}" >>/tmp/slurm-ci-apt.log 2>&1 || {
            [[ $own_policy -eq 1 ]] && rm -f "$policy"
            tail -n 30 /tmp/slurm-ci-apt.log >&2
            die "apt-get install ${missing[*]} failed (log: /tmp/slurm-ci-apt.log)"
        }
    fi
    [[ $own_policy -eq 1 ]] && rm -f "$policy"
    return 0
}

# ---------------------------------------------------------------------------------------------
# Writes $2 to $1 when different; returns 0 when the file changed.
write_if_changed() {
    local path=$1 content=$2
    if [[ -f $path ]] && [[ "$(cat "$path")" == "$content" ]]; then
        return 1
    fi
    printf '%s\n' "$content" >"$path"
    return 0
}

NODE_LINE=""
NODE_NAME=""
configure() {
    mkdir -p "$CONF_DIR" "$LOG_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd"
    # The node as slurmd sees it: NodeName=... CPUs=... RealMemory=... (first line of slurmd -C).
    NODE_LINE=$(slurmd -C | head -n 1)
    [[ $NODE_LINE == NodeName=* ]] || die "unexpected 'slurmd -C' output: $NODE_LINE"
    NODE_NAME=${NODE_LINE#NodeName=}
    NODE_NAME=${NODE_NAME%% *}

    local changed=1 gres_lines="" i dev
    for ((i = 0; i < GPUS; i++)); do
        dev=/dev/slurm-ci-gpu$i
        if [[ ! -c $dev ]]; then
            rm -f "$dev"
            if ! mknod -m 666 "$dev" c 195 "$i" 2>/dev/null; then
                # No CAP_MKNOD (e.g. an unprivileged container): any character device will do.
                [[ $GPUS -eq 1 ]] || die "mknod $dev failed (needs CAP_MKNOD); set SLURM_CI_GPUS=1"
                log "mknod not permitted: the fake GPU is /dev/null"
                dev=/dev/null
            fi
        fi
        gres_lines+="Name=gpu File=$dev"$'\n'
    done

    write_if_changed "$CONF_DIR/gres.conf" "# Written by .ci/slurm/setup.sh: ${GPUS} fake GPU(s), character devices (major 195).
${gres_lines%$'\n'}" && changed=0

    write_if_changed "$CONF_DIR/slurm.conf" "# Written by .ci/slurm/setup.sh: a single-node CI cluster with ${GPUS} fake GPU(s).
ClusterName=ci
SlurmctldHost=${NODE_NAME}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=${STATE_DIR}/slurmctld
SlurmdSpoolDir=${STATE_DIR}/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that does not ask for memory is given the whole node.
DefMemPerCPU=1000
GresTypes=gpu
# No slurmdbd: sacct does not work here; squeue and scontrol see finished jobs for MinJobAge s.
AccountingStorageType=accounting_storage/none
# Memory enforced without cgroups (TaskPlugin=task/none: a container has no cgroup of its own to give): slurmd samples
# each step's RSS every second and, with OverMemoryKill, kills a job past its --mem (\"Exceeded job memory limit\",
# state OUT_OF_MEMORY), as a cluster's cgroup limit would.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=5
InactiveLimit=0
${NODE_LINE} NodeAddr=127.0.0.1 Gres=gpu:${GPUS} State=UNKNOWN
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP" && changed=0
    return $changed
}

# ---------------------------------------------------------------------------------------------
have_systemd() { [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; }

# A daemon killed with its session leaves its pidfile; the pid may be a zombie (no init reaps it in
# a container) or reused, so kill -0 alone would call it alive and leave the node without a daemon.
pid_alive() {
    local pid
    [[ -f $1 ]] && pid=$(cat "$1") && [[ -r /proc/$pid/status ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurm* ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"
}

stop_daemon() {  # $1: pidfile (only daemons this script started write these)
    local pidfile=$1 pid i
    pid_alive "$pidfile" || return 0
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -9 "$pid" 2>/dev/null || true
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    munge_ok && return 0
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    if have_systemd; then
        systemctl restart munge
    else
        install -d -o munge -g munge -m 755 /run/munge
        runuser -u munge -- /usr/sbin/munged
    fi
    local i
    for ((i = 0; i < 50; i++)); do
        munge_ok && return 0
        sleep 0.1
    done
    die "munged does not answer"
}

start_slurm() {  # $1: 1 when the configuration changed
    local restart=$1
    if have_systemd; then
        if [[ $restart -eq 1 ]] || ! systemctl is-active -q slurmctld || ! systemctl is-active -q slurmd; then
            systemctl restart slurmctld slurmd
        fi
        return 0
    fi
    if [[ $restart -eq 1 ]]; then
        stop_daemon /run/slurmd.pid
        stop_daemon /run/slurmctld.pid
    fi
    if ! pid_alive /run/slurmctld.pid; then
        # -c: a fresh controller state on a (re)configured CI cluster; -i: ignore stale state files.
        if [[ $restart -eq 1 ]]; then slurmctld -c; else slurmctld -i; fi
    fi
    # A controller started just after a killed one may take half a minute to bind its port.
    local deadline=$((SECONDS + WAIT_S))
    until scontrol ping >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "slurmctld does not answer after ${WAIT_S}s"
        sleep 0.2
    done
    pid_alive /run/slurmd.pid || slurmd
}

# Jobs still queued or running when a CI run starts are left from a test session that was killed
# (a session's end, a stopped machine): the tests cancel their own jobs when they end normally. A
# controller restarted over a killed one recovers them as running or requeues them, and one holds
# the node's only GPU until its time limit (20 min for the CI preset's jobs), so the next run's GPU
# jobs wait behind it. This cluster exists for the tests; a CI run starts with an empty queue.
cancel_leftovers() {
    local ids i
    ids=$(squeue -h -o %i | tr '\n' ' ')
    [[ -z ${ids// /} ]] && return 0
    log "cancelling job(s) left from an earlier session: ${ids}"
    # shellcheck disable=SC2086
    scancel $ids || die "scancel ${ids} failed"
    for ((i = 0; i < 20; i++)); do
        [[ -z $(squeue -h -o %i) ]] && return 0
        sleep 0.5
    done
    # A job recovered as running whose processes died with the old slurmd stays "completing"
    # for good: setting the node down ends it, and the node is resumed at once.
    log "job(s) $(squeue -h -o %i | tr '\n' ' ')still completing: node ${NODE_NAME} set down and resumed to end them"
    scontrol update NodeName="$NODE_NAME" State=DOWN Reason=ci-leftover-jobs || die "scontrol update State=DOWN failed"
    scontrol update NodeName="$NODE_NAME" State=RESUME || die "scontrol update State=RESUME failed"
    local deadline=$((SECONDS + WAIT_S))
    while [[ -n $(squeue -h -o %i) ]]; do
        ((SECONDS < deadline)) || die "jobs $(squeue -h -o %i | tr '\n' ' ')still queued ${WAIT_S}s after scancel"
        sleep 0.5
    done
}

wait_idle() {
    local deadline=$((SECONDS + WAIT_S)) state resumed=0
    while ((SECONDS < deadline)); do
        state=$(sinfo -h -N -n "$NODE_NAME" -o %T 2>/dev/null | head -n 1)
        case $state in
            idle | mixed | allocated)
                log "node ${NODE_NAME} is ${state}: $(sinfo -h -o '%P %D %c cpus %m MB %G')"
                return 0 ;;
            *drain* | *down* | *fail*)
                # ReturnToService=2 lifts "not responding"; a drain for a config problem is
                # lifted once, and if it comes back the reason is reported.
                if [[ $resumed -eq 0 && $state == *drain* ]]; then
                    scontrol update NodeName="$NODE_NAME" State=RESUME >/dev/null 2>&1 || true
                    resumed=1
                fi ;;
        esac
        sleep 0.5
    done
    sinfo -R >&2 || true
    die "node ${NODE_NAME} not idle after ${WAIT_S}s (state: ${state:-unknown})"
}

main() {
    local t0=$SECONDS restart=0
    install_packages
    configure && restart=1
    start_munge
    start_slurm "$restart"
    cancel_leftovers
    wait_idle
    log "ready in $((SECONDS - t0))s (restart=${restart})"
}

main "$@"
