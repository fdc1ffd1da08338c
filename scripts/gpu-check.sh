#!/usr/bin/env bash
# gpu-check: Tessera's NVML backend, DCGM-named metrics, device plugin and health monitor on a real
# NVIDIA GPU, each compared with nvidia-smi (the independent reference). Prints one JSON report
# (scripts/gpu_check/gpucheck.py documents it) and exits 1 on a mismatch, 0 when all matched.
#
#   scripts/gpu-check.sh [--out DIR] [--bin DIR | --tessera FILE --kubelet FILE]
#                        [--watch SECONDS] [--no-load]
#   scripts/gpu-check.sh --bundle DIR     (on a build machine: see "Binaries" below)
#
# No driver (no nvidia-smi, or one that cannot reach a driver): prints a report with
# "status": "skipped" and the reason, and exits 0. That is the documented skip, so CI without a
# GPU passes; ctest runs this path (gpu_check_compare_test).
#
# Safe by construction: only read-only queries. nvidia-smi is run as `-q -x`, `-L`, `topo -m` and
# `nvlink -s`; Tessera's NVML backend only reads (nvmlDeviceGet*, and an event set for XIDs in its
# own process). Nothing changes MIG mode, clocks, power limits, ECC or persistence, and nothing
# resets a GPU. The optional load is a PyTorch matrix-product loop in one process, stopped at
# the end (plain device allocations, well under the GPU's memory).
#
# Binaries (tessera and gpu_check_kubelet, the test kubelet's driver), first found wins:
#   --tessera FILE --kubelet FILE    these two files
#   --bin DIR                        DIR/tessera and DIR/gpu_check_kubelet (+ DIR/../lib if any)
#   build/gpu-check-bundle/          made here by --bundle: bin/ plus the shared libraries they
#                                    need beyond glibc in lib/, for a machine without Debian 12's
#                                    packages (the device machine); carry this folder there
#   build/release/                   a release build of this checkout
#   otherwise it builds build/release (cmake --preset release; needs scripts/setup.sh's packages)
#
# Steps (files in --out DIR, default a new temporary directory; the report is DIR/report.json):
#   1. nvidia-smi -q -x, `tessera gpus --backend nvml -o json`, nvidia-smi -q -x again: identity,
#      memory, MIG and ECC mode, versions, idle readings bracketed by the two nvidia-smi readings;
#      `nvidia-smi topo -m`, `-L`, `nvlink -s`: topology, NUMA, MIG UUIDs, NVLink states.
#   2. A load (PyTorch if it sees CUDA, else none, said so in the report), then nvidia-smi,
#      `tessera gpus -o prometheus` (dcgm-exporter names), nvidia-smi: the metrics within a second.
#   3. For --watch seconds (default 60), at once: `tessera gpus --watch` (events and health
#      verdicts: no false XID, no flapping) and gpu_check_kubelet driving `tessera device-plugin
#      --backend nvml` (registration, devices, health, Allocate's device nodes, SIGTERM cleanup).
#   4. gpucheck.py compares everything and prints the report.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CHECK_PY="$ROOT/scripts/gpu_check/gpucheck.py"
NVIDIA_SMI="${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}"
OUT_DIR=""
BIN_DIR=""
TESSERA_FILE=""
KUBELET_FILE=""
BUNDLE=""
WATCH=60
LOAD=1

usage() { sed -n '2,10p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_DIR="${2:?--out needs a directory}"; shift 2 ;;
    --bin) BIN_DIR="${2:?--bin needs a directory}"; shift 2 ;;
    --tessera) TESSERA_FILE="${2:?--tessera needs a file}"; shift 2 ;;
    --kubelet) KUBELET_FILE="${2:?--kubelet needs a file}"; shift 2 ;;
    --bundle) BUNDLE="${2:?--bundle needs a directory}"; shift 2 ;;
    --watch) WATCH="${2:?--watch needs seconds}"; shift 2 ;;
    --no-load) LOAD=0; shift ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$WATCH" in ''|*[!0-9]*) echo "gpu-check: --watch: expected whole seconds, got '$WATCH'" >&2; exit 2 ;; esac

log() { echo "gpu-check: $*" >&2; }

# Prints a report without gpucheck.py's comparison; $1 skip|abort.
short_report() {
  if command -v python3 >/dev/null 2>&1; then
    python3 "$CHECK_PY" "$1" --reason "$2"
  else
    local status=skipped; [ "$1" = abort ] && status=fail
    printf '{"schema": "tessera.gpu-check/v1", "status": "%s", "reason": "%s"}\n' "$status" \
      "$(printf '%s' "$2" | tr '"\\' "''")"
    [ "$1" = skip ]
  fi
}

build_release() {
  log "building tessera and gpu_check_kubelet (build/release)"
  (cd "$ROOT" && cmake --preset release >&2 &&
    cmake --build build/release --target tessera gpu_check_kubelet -j"$(nproc)" >&2)
}

# --bundle: binaries plus every shared library they load that is not glibc's.
if [ -n "$BUNDLE" ]; then
  build_release || { log "build failed"; exit 1; }
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" || exit 1
  cp "$ROOT/build/release/src/main/tessera" "$ROOT/build/release/src/main/tessera-all" \
    "$ROOT/build/release/src/deviceplugin/gpu_check_kubelet" \
    "$BUNDLE/bin/" || exit 1
  for b in "$BUNDLE"/bin/*; do
    ldd "$b" | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*) ;;
      *) cp -L "$lib" "$BUNDLE/lib/" ;;
    esac
  done
  log "bundle in $BUNDLE: $(du -sh "$BUNDLE" | cut -f1)"
  exit 0
fi

# 0. Is there a driver?
if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
  log "skipped: no nvidia-smi ($NVIDIA_SMI) on this machine"
  short_report skip "no NVIDIA driver: $NVIDIA_SMI not found"
  exit $?
fi
if ! smi_err="$("$NVIDIA_SMI" -L 2>&1)"; then
  log "skipped: $NVIDIA_SMI -L failed: $smi_err"
  short_report skip "no NVIDIA driver answers: $NVIDIA_SMI -L failed: $(echo "$smi_err" | head -1)"
  exit $?
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo '{"schema": "tessera.gpu-check/v1", "status": "fail", "reason": "python3 is required"}'
  exit 1
fi

# Binaries. A bundle's libraries are put on the loader path of Tessera's processes only: its
# libstdc++ must not replace the newer one PyTorch and nvidia-smi were built against.
TESSERA="" PROBE=""
RUNENV=()
pick() {  # $1 bin dir
  if [ -x "$1/tessera" ] && [ -x "$1/gpu_check_kubelet" ]; then
    TESSERA="$1/tessera" PROBE="$1/gpu_check_kubelet"
    if [ -d "$1/../lib" ]; then
      RUNENV=(env "LD_LIBRARY_PATH=$(cd "$1/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    fi
    return 0
  fi
  return 1
}
tessera() { ${RUNENV[@]+"${RUNENV[@]}"} "$TESSERA" "$@"; }
if [ -n "$TESSERA_FILE$KUBELET_FILE" ]; then
  if [ ! -x "$TESSERA_FILE" ] || [ ! -x "$KUBELET_FILE" ]; then
    short_report abort "--tessera and --kubelet: both must name executable files"; exit 1
  fi
  TESSERA="$TESSERA_FILE" PROBE="$KUBELET_FILE"
elif [ -n "$BIN_DIR" ]; then
  pick "$BIN_DIR" || { short_report abort "--bin $BIN_DIR: no tessera and gpu_check_kubelet there"; exit 1; }
elif pick "$ROOT/build/gpu-check-bundle/bin"; then :
elif [ -x "$ROOT/build/release/src/main/tessera" ] && [ -x "$ROOT/build/release/src/deviceplugin/gpu_check_kubelet" ]; then
  TESSERA="$ROOT/build/release/src/main/tessera" PROBE="$ROOT/build/release/src/deviceplugin/gpu_check_kubelet"
elif build_release; then
  TESSERA="$ROOT/build/release/src/main/tessera" PROBE="$ROOT/build/release/src/deviceplugin/gpu_check_kubelet"
else
  short_report abort "no tessera build and building failed (run scripts/setup.sh, or carry a bundle made by scripts/gpu-check.sh --bundle build/gpu-check-bundle)"
  exit 1
fi
if ! tessera --version >/dev/null 2>&1; then
  short_report abort "$TESSERA does not run here: $(tessera --version 2>&1 | head -1)"
  exit 1
fi

# NVML: the loader's libnvidia-ml.so.1, else the usual driver folders (containers often mount the
# driver under /usr/local/nvidia without adding it to the loader's path).
if [ -z "${TESSERA_NVML_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1 '; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    if [ -e "$d/libnvidia-ml.so.1" ]; then export TESSERA_NVML_LIB="$d/libnvidia-ml.so.1"; break; fi
  done
fi

RUN="${OUT_DIR:-$(mktemp -d /tmp/tessera-gpu-check-XXXXXX)}"
mkdir -p "$RUN" || exit 1
: > "$RUN/steps.tsv"; : > "$RUN/notes.txt"
log "files in $RUN; tessera: $TESSERA; NVML: ${TESSERA_NVML_LIB:-libnvidia-ml.so.1 from the loader}"
note() { echo "$*" >> "$RUN/notes.txt"; }
# step NAME FILE CMD...: runs CMD with stdout to FILE (stderr to FILE.err), records its exit code.
step() {
  local name="$1" file="$2"; shift 2
  "$@" > "$RUN/$file" 2> "$RUN/$file.err"
  local rc=$?
  printf '%s\t%s\n' "$name" "$rc" >> "$RUN/steps.tsv"
  [ -s "$RUN/$file.err" ] || rm -f "$RUN/$file.err"
  return $rc
}

# 1. Identity and idle readings.
step "nvidia-smi -q -x (idle, before)" smi-idle-before.xml "$NVIDIA_SMI" -q -x
step "tessera gpus --backend nvml -o json" tessera-gpus.json tessera gpus --backend nvml -o json
step "nvidia-smi -q -x (idle, after)" smi-idle-after.xml "$NVIDIA_SMI" -q -x
step "nvidia-smi topo -m" topo.txt "$NVIDIA_SMI" topo -m
step "nvidia-smi -L" smi-list.txt "$NVIDIA_SMI" -L
if ! step "nvidia-smi nvlink -s" nvlink-status.txt "$NVIDIA_SMI" nvlink -s || [ ! -s "$RUN/nvlink-status.txt" ]; then
  rm -f "$RUN/nvlink-status.txt"
fi
for f in /dev/nvidia*; do [ -c "$f" ] && echo "$f"; done > "$RUN/dev-nodes.txt"

# 2. Load, and the DCGM metrics under it.
LOAD_PID=""
stop_load() { if [ -n "$LOAD_PID" ]; then kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null; LOAD_PID=""; fi; }
trap stop_load EXIT
if [ "$LOAD" = 1 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  python3 - "$RUN/load.ready" > "$RUN/load.log" 2>&1 <<'PY' &
import sys, torch
a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
torch.cuda.synchronize()
open(sys.argv[1], "w").write(torch.__version__ + "\n")
while True:  # stopped by gpu-check.sh
    for _ in range(50):
        c = a @ b
    torch.cuda.synchronize()
PY
  LOAD_PID=$!
  for _ in $(seq 1 120); do
    [ -s "$RUN/load.ready" ] && break
    kill -0 "$LOAD_PID" 2>/dev/null || break
    sleep 0.5
  done
  if [ -s "$RUN/load.ready" ]; then
    printf 'pytorch\ttorch %s: bf16 8192x8192 matrix products on cuda:0 until stopped\n' "$(head -1 "$RUN/load.ready")" > "$RUN/load.tsv"
    sleep 2  # let utilization and power readings reflect the load
  else
    stop_load
    printf 'none\tPyTorch did not start a load: %s\n' "$(tail -1 "$RUN/load.log" 2>/dev/null)" > "$RUN/load.tsv"
  fi
else
  printf 'none\t%s\n' "$([ "$LOAD" = 1 ] && echo 'no PyTorch with CUDA on this machine' || echo '--no-load')" > "$RUN/load.tsv"
fi
step "nvidia-smi -q -x (load, before)" smi-load-before.xml "$NVIDIA_SMI" -q -x
step "tessera gpus --backend nvml -o prometheus" dcgm.prom tessera gpus --backend nvml -o prometheus --hostname gpu-check
step "nvidia-smi -q -x (load, after)" smi-load-after.xml "$NVIDIA_SMI" -q -x

# 3. Health and the device plugin, side by side, for --watch seconds (the load keeps running).
RESOURCES="$(python3 "$CHECK_PY" expected-resources --dir "$RUN" 2>/dev/null || echo 1)"
step "tessera gpus --backend nvml --watch ${WATCH}s" health-watch.txt tessera gpus --backend nvml --watch "${WATCH}s" &
WATCH_PID=$!
step "gpu_check_kubelet" deviceplugin.json ${RUNENV[@]+"${RUNENV[@]}"} "$PROBE" --tessera "$TESSERA" --expect-resources "$RESOURCES" \
  --watch-seconds "$WATCH" -- --backend nvml --metrics-interval 1s
wait "$WATCH_PID"
stop_load
if ! tessera --help 2>/dev/null | grep -q '^ *dra-driver '; then
  note "tessera dra-driver: not a subcommand of this build; not checked"
fi

# 4. The report.
python3 "$CHECK_PY" report --dir "$RUN" --out "$RUN/report.json"
