#!/usr/bin/env bash
# Install what building and testing libshmreg needs on Debian 12. Idempotent:
# does nothing when every package is already there. Runs apt-get as root, or
# through sudo where the caller is not root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  liburcu-dev libxxhash-dev libcmocka-dev
  clang libclang-rt-14-dev llvm valgrind
  abigail-tools   # abidw and abidiff, for the ABI tier (15-abi)
  libmicrohttpd-dev
  libsystemd-dev  # the server's crash survival: sd_notify's fd store (optional: SERVER_WITH_SYSTEMD)
  rapidjson-dev  # RapidJSON (headers only): the server's reading of every request body
  libjson-c-dev  # json-c: the reading the server's JSON reader replaced, the fuzz target's reference (tier 70)
  libb64-0d  # tritonclient 2.48.0's perf_analyzer, which runs on glibc 2.36 (tier 60)
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  python3 python3-venv python3-pip curl
  python3-dev  # Python.h for the nanobind extension (tier 65-python)
  libucx-dev ucx-utils  # remote regions (UCX 1.13: headers; libucp dlopened; ucx_perftest)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
