#!/usr/bin/env bash
# Installs every Debian 12 package that building, running and testing Tessera needs.
# Idempotent; run as root (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git libboost-dev
  clang libclang-rt-14-dev
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev sqlite3 libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  prometheus openssl libssl-dev
  iproute2 util-linux
  containerd runc containernetworking-plugins
  python3
  chromium
)
# Node.js for the browser tests: Debian's nodejs + npm unless a node with npm is already
# installed (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's npm).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all ${#PACKAGES[@]} packages present"
# The dashboard's browser tests: Playwright (playwright-core, pinned in package-lock.json) drives
# Debian's chromium; installed from npm's cache when it has them (--prefer-offline).
DASH="$(dirname "$0")/../tests/dashboard"
if [ ! -d "$DASH/node_modules/playwright-core" ] || [ "$DASH/package-lock.json" -nt "$DASH/node_modules" ]; then
  (cd "$DASH" && npm ci --prefer-offline --no-audit --no-fund)
fi
