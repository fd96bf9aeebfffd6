#!/usr/bin/env bash
# Installs the Debian packages casestudy's build and tests need, when missing.
# As root it runs apt-get; otherwise it prints the command to run.
set -euo pipefail
# python3-torch: the same libtorch for Python (bench/reference/test_kernels.py profiles the CPU engine).
# python3-pyflakes: undefined names in the GPU-only Python scripts (make test).
pkgs=(cmake ninja-build g++ libtorch-dev libgloo-dev libopenblas0-openmp chromium slurm-wlm munge python3-torch
  python3-pyflakes)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "casestudy needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
