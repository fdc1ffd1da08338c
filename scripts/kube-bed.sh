#!/usr/bin/env bash
# Builds the Kubernetes test bed (tests/kube: kube-apiserver, kube-scheduler,
# kube-controller-manager, kubelet and etcd from their Go modules, pinned by tests/kube/go.sum) into a cache
# outside the clone and prints the bin directory on stdout. A second run with the same go.mod,
# go.sum, Go version and flags only checks the stamp and prints the directory (seconds).
#
#   scripts/kube-bed.sh            build (or reuse) and print the bin dir
#   scripts/kube-bed.sh --check    print the bin dir if it is built, exit 1 otherwise
#
# Env: TESSERA_CACHE (default ~/.cache/tessera), KUBE_BED_JOBS (go build -p, default 2: the
# apiserver's link step alone takes ~2 GiB). Needs Go >= 1.26 (k8s.io/kubernetes v1.37's go.mod).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MOD="$ROOT/tests/kube"
KUBE_VERSION=v1.37.2
NEED_GO=1.26

# Go from PATH, else where its tarball installs it.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi
# Never fetch a newer toolchain behind the caller's back: the local Go must do.
export GOTOOLCHAIN=local

have_go() {
  command -v go >/dev/null || return 1
  local v
  v="$(go env GOVERSION 2>/dev/null)" || return 1   # e.g. go1.26.8
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$NEED_GO" "$v" | sort -V | head -1)" = "$NEED_GO" ]
}
if ! have_go; then
  echo "kube-bed: Go >= $NEED_GO is needed to build the bed (found: $(go version 2>/dev/null || echo none))" >&2
  exit 2
fi

LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"
KEY="$( { cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/etcd/main.go"; go env GOVERSION GOARCH; echo "$LDFLAGS"; } |
  sha256sum | cut -c1-16)"
CACHE="${TESSERA_CACHE:-$HOME/.cache/tessera}/kube-bed/$KEY"
BIN="$CACHE/bin"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler)

built() {
  [ -f "$CACHE/stamp" ] || return 1
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}
if [ "${1:-}" = "--check" ]; then
  built && { echo "$BIN"; exit 0; }
  exit 1
fi
if built; then echo "$BIN"; exit 0; fi

mkdir -p "$CACHE"
# One builder at a time per cache entry (CI and a developer's ctest may race).
exec 9>"$CACHE/lock"
flock 9
if built; then echo "$BIN"; exit 0; fi
STAGE="$CACHE/bin.tmp.$$"
rm -rf "$STAGE" && mkdir -p "$STAGE"
trap 'rm -rf "$STAGE"' EXIT
start=$(date +%s)
echo "kube-bed: building Kubernetes $KUBE_VERSION and etcd into $BIN (cold: several minutes)" >&2
cd "$MOD"
# -mod=readonly: go.sum is the pin; a missing sum is an error, never a silent download of
# something new. GOFLAGS from the environment (e.g. -mod=mod) is replaced, not merged.
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
go build -p "${KUBE_BED_JOBS:-2}" -trimpath -ldflags="$LDFLAGS" -o "$STAGE/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubelet ./etcd >&2
mv -T "$STAGE" "$BIN" 2>/dev/null || { rm -rf "$BIN"; mv -T "$STAGE" "$BIN"; }
trap - EXIT
"$BIN/etcd" --version | sed -n 1p >&2  # sed reads it all: head would leave etcd a SIGPIPE (141)
"$BIN/kube-apiserver" --version >&2
echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - start ))s" >"$CACHE/stamp"
echo "kube-bed: built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
