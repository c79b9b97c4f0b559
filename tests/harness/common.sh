# Shell functions shared by tests/harness/slurm-cluster and netns-cluster.
# The caller sets D (the cluster's state directory) before sourcing.
# Nothing here kills by name: every daemon is stopped by the PID in its PID
# file, after checking /proc/PID/exe.

log() { echo "[${HARNESS_NAME:-harness} $(date +%T)] $*" >&2; }

alive() {  # alive PIDFILE EXE -> prints the pid if it runs EXE (and is no zombie)
  local pid
  [[ -s $1 ]] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] || return 1
  [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 1
  case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in *"$2"*) echo "$pid" ;; *) return 1 ;; esac
}

wait_for() {  # wait_for SECONDS CMD...
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    sleep 0.1
  done
}

stop_pidfile() {  # stop_pidfile PIDFILE EXE: TERM, then KILL after 10 s
  local pid i
  pid=$(alive "$1" "$2") || { rm -f "$1"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do alive "$1" "$2" >/dev/null || break; sleep 0.1; done
  if alive "$1" "$2" >/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$1"
}

# slurmstepd of THIS cluster: they carry our SLURM_CONF in their environment.
our_stepds() {
  local p
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/exe" 2>/dev/null)" in *slurmstepd*) ;; *) continue ;; esac
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$D/etc/slurm.conf" &&
      echo "${p#/proc/}"
  done
  return 0
}

unavailable() {  # records why this machine cannot run the cluster; tests skip with it
  echo "unavailable: $*" >"$D/status"
  log "cluster unavailable: $*"
  exit 0
}

require_slurm_tools() {
  [[ $(id -u) == 0 ]] || unavailable "slurmd must run as root (this is uid $(id -u))"
  local tool
  for tool in munged munge slurmctld slurmd srun scontrol sinfo "$@"; do
    command -v "$tool" >/dev/null || unavailable "$tool is not installed (scripts/install-deps test)"
  done
  [[ -d /sys/fs/cgroup ]] || unavailable "slurmd needs a cgroup filesystem at /sys/fs/cgroup"
}

start_munged() {  # one munged with its own key and socket under $D
  local sock=$D/msock/munge.sock
  mkdir -p "$D"/{munge,msock,run,log}
  chmod 700 "$D/munge"
  chmod 755 "$D/msock"
  alive "$D/run/munged.pid" munged >/dev/null && return 0
  [[ -s $D/munge/munge.key ]] || {
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$D/munge/munge.key"
  }
  rm -f "$sock" "$sock.lock"
  munged --force --socket="$sock" --key-file="$D/munge/munge.key" \
    --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" \
    --seed-file="$D/munge/munged.seed"
  wait_for 10 sh -c "munge -S '$sock' -n | unmunge -S '$sock'" ||
    { log "munged does not answer: $D/log/munged.log"; exit 1; }
}

# The slurm.conf lines every test cluster shares. See ../shared/testbed/README.md
# for why each is there (TmpFS per node for PMIx, batch_sched_delay=0 and
# MinJobAge=5 for quick srun and sbatch --wait, config_overrides for fake CPUs).
slurm_conf_common() {
  cat <<CONF
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/msock/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/slurmd-%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
TmpFS=$D/tmp/%n
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmdTimeout=60
CONF
}

registered() {  # registered NODE EPOCH [RUNNER...]: slurmctld saw NODE's slurmd start at/after EPOCH
  local node=$1 since=$2 t
  shift 2
  t=$("$@" scontrol show node -o "$node" 2>/dev/null | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)
  [[ -n $t && $t != None && $(date -d "$t" +%s 2>/dev/null || echo 0) -ge $((since - 1)) ]]
}

all_idle() {  # all_idle COUNT [RUNNER...]
  local count=$1
  shift
  [[ $("$@" sinfo -h -N -o '%T' 2>/dev/null | grep -cxE 'idle|mixed|allocated') -eq $count ]]
}

stop_slurm() {  # cancels this cluster's jobs, then stops slurmd, stepds, slurmctld, munged
  local runner=("$@") pf i left jobs
  if [[ -f $D/etc/slurm.conf ]] && alive "$D/run/slurmctld.pid" slurmctld >/dev/null; then
    jobs=$(SLURM_CONF=$D/etc/slurm.conf "${runner[@]}" squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    [[ -z ${jobs// /} ]] || SLURM_CONF=$D/etc/slurm.conf "${runner[@]}" scancel --quiet $jobs 2>/dev/null || true
  fi
  for pf in "$D"/run/slurmd-*.pid; do [[ -e $pf ]] && stop_pidfile "$pf" slurmd; done
  for i in $(seq 50); do [[ -z $(our_stepds) ]] && break; sleep 0.1; done
  left=$(our_stepds | tr '\n' ' ')
  [[ -z ${left// /} ]] || kill -KILL $left 2>/dev/null || true
  stop_pidfile "$D/run/slurmctld.pid" slurmctld
  stop_pidfile "$D/run/munged.pid" munged
  rm -f "$D/msock/munge.sock" "$D/msock/munge.sock.lock"
}
