#!/usr/bin/env bash
# Installs the Debian packages shardwise needs, only those that are missing. Idempotent:
# when everything is present it changes nothing and runs no apt-get at all.
set -euo pipefail

packages=(
  build-essential cmake g++ clang libclang-rt-14-dev ccache git python3 python3-venv python3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libre2-dev pkg-config
  libopenmpi-dev openmpi-bin iproute2
  libdnnl-dev ocl-icd-opencl-dev
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
