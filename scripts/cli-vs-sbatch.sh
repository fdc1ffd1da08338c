#!/usr/bin/env bash
# Submissions from the command line, Tessera beside Slurm on this machine (issue 25's "side by
# side in the same run"): `tessera apply -f JOB.yaml` against `sbatch --hold --wrap=true`, one
# process per job, sequential and from 8 concurrent submitters, interleaved, medians of rounds.
#
# Both daemons stay up for the whole run. Tessera: a fresh `tessera server` (token auth, SQLite,
# scheduler on, as shipped) in a temporary directory, no nodes, so that its jobs wait Queued as
# Slurm's held jobs wait. Slurm: a slurmctld already running and reachable by `sbatch` (Debian's
# slurm-wlm and munge; see docs/control-plane.md, "The CLI beside sbatch", for a one-node
# slurm.conf). Slurm answers before its state is on disk; Tessera after its fsync.
#
# Usage: scripts/cli-vs-sbatch.sh [JOBS_PER_RUN (default 300)] [ROUNDS (default 3)]
# Prints one line per run and a JSON summary (medians, jobs/s). Not run by the tests.
set -euo pipefail
N=${1:-300}
ROUNDS=${2:-3}
CONC=8
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TESSERA=${TESSERA:-$ROOT/build/release/src/main/tessera}
command -v sbatch >/dev/null || { echo "sbatch not found (apt-get install slurm-wlm munge)" >&2; exit 2; }
command -v bc >/dev/null || { echo "bc not found (apt-get install bc)" >&2; exit 2; }
sbatch --version >/dev/null
sinfo >/dev/null 2>&1 || { echo "no slurmctld reachable (start munged, slurmctld, slurmd)" >&2; exit 2; }
[ -x "$TESSERA" ] || { echo "no $TESSERA (cmake --build --preset release)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/cli-vs-sbatch.XXXXXX)
trap 'kill $SERVER_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$TESSERA" server --data-dir "$WORK/data" --listen 127.0.0.1:0 >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$WORK/server.out" "$WORK/server.log" 2>/dev/null && break
  sleep 0.1
done
ADDR=$(grep -ho "listening on [0-9.:]*" "$WORK/server.out" "$WORK/server.log" | head -1 | awk '{print $3}')
[ -n "$ADDR" ] || { echo "tessera server did not start: $(cat "$WORK/server.log")" >&2; exit 1; }
export TESSERA_SERVER="http://$ADDR"
export TESSERA_TOKEN=$(cat "$WORK/data/admin-token")

# One manifest per job, written before the clock starts.
mkdir -p "$WORK/jobs"
job_file() {  # NAME -> path
  local f="$WORK/jobs/$1.yaml"
  cat >"$f" <<EOF
apiVersion: tessera.dev/v1
kind: TrainingJob
metadata:
  name: $1
  namespace: bench
spec:
  queue: default
  groups:
  - name: worker
    count: 1
    gpusPerReplica: 1
EOF
  echo "$f"
}

now() { date +%s.%N; }
# run KIND ROUND CONCURRENCY -> jobs/s
run() {
  local kind=$1 round=$2 conc=$3 per=$((N / $3)) t0 t1
  for c in $(seq 1 "$conc"); do
    for i in $(seq 1 "$per"); do job_file "r$round-c$conc-$c-$i" >/dev/null; done
  done
  t0=$(now)
  for c in $(seq 1 "$conc"); do
    (
      for i in $(seq 1 "$per"); do
        if [ "$kind" = sbatch ]; then
          sbatch --hold --wrap=true -o /dev/null -J "r$round-$c-$i" >/dev/null
        else
          "$TESSERA" apply -f "$WORK/jobs/r$round-c$conc-$c-$i.yaml" >/dev/null
        fi
      done
    ) &
  done
  wait $(jobs -p | grep -v "^$SERVER_PID$") 2>/dev/null || true
  t1=$(now)
  echo "$kind round $round concurrency $conc: $((per * conc)) jobs in $(echo "$t1 - $t0" | bc) s" >&2
  echo "scale=1; $((per * conc)) / ($t1 - $t0)" | bc
}

SLURM_BEFORE=$(squeue -h -t PD | wc -l)
declare -A R
for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 $CONC; do
    for kind in sbatch tessera; do
      R["$kind-$conc"]+="$(run $kind "$round" "$conc") "
    done
  done
done
# Every submission must have been accepted (a failed one would only make its side look fast).
WANT=$((ROUNDS * (N + (N / CONC) * CONC)))
GOT_T=$("$TESSERA" get trainingjobs -n bench -o name | wc -l)
GOT_S=$(($(squeue -h -t PD | wc -l) - SLURM_BEFORE))
if [ "$GOT_T" -ne "$WANT" ] || [ "$GOT_S" -ne "$WANT" ]; then
  echo "submissions lost: want $WANT each, tessera has $GOT_T, slurm $GOT_S" >&2
  exit 1
fi
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
S1=$(median "${R[sbatch-1]}"); T1=$(median "${R[tessera-1]}")
S8=$(median "${R[sbatch-$CONC]}"); T8=$(median "${R[tessera-$CONC]}")
cat <<EOF
{"jobs_per_run": $N, "rounds": $ROUNDS, "loadavg": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "sequential": {"sbatch_per_s": $S1, "tessera_apply_per_s": $T1, "ratio": $(echo "scale=2; $T1 / $S1" | bc)},
 "concurrent_$CONC": {"sbatch_per_s": $S8, "tessera_apply_per_s": $T8, "ratio": $(echo "scale=2; $T8 / $S8" | bc)},
 "runs": {"sbatch_1": "${R[sbatch-1]}", "tessera_1": "${R[tessera-1]}", "sbatch_$CONC": "${R[sbatch-$CONC]}", "tessera_$CONC": "${R[tessera-$CONC]}"}}
EOF
