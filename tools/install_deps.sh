#!/usr/bin/env bash
# Installs everything FlashSteps builds and tests with on Debian 12 / Ubuntu (run as root or
# with sudo): compilers and libraries from Debian's packages, and the pinned Python tools
# (Sphinx, matplotlib, pytest, nanobind) into .venv. The CUDA toolkit (nvcc) is not a Debian package
# in the version we need; it is used when present (see README).
#   tools/install_deps.sh [--no-browser]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
packages=(
  cmake make g++ git python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev          # GoogleTest, Google Benchmark
  libtrilinos-kokkos-dev                              # Kokkos (the float64 reference)
  nlohmann-json3-dev libcli11-dev libimath-dev        # JSON, command line, fp16 conversions
  clang-19 clang-tools-19 lld-19 libclang-rt-19-dev   # HIP: Debian's clang 19 (bundler, linker,
  libamdhip64-dev rocm-device-libs rocminfo           # builtins) with ROCm 5.2 (gfx90a/940/942)
  doxygen                                             # API reference
  python3-dev                                         # the Python module (python/)
)
[ "${1:-}" = "--no-browser" ] || packages+=(chromium)  # the book's headless browser check
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing Debian packages: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
if [ ! -x "$root/.venv/bin/python3" ]; then
  python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/pip" install -q --disable-pip-version-check -r "$root/requirements-docs.txt" \
  -r "$root/python/requirements.txt"
if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "CUDA toolkit: $( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) )"
else
  echo "CUDA toolkit not found: the cuda preset is skipped (install CUDA 12.8 or newer for sm_90a)."
fi
