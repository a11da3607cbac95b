#!/usr/bin/env bash
# Copies the shared libraries that a build's executables need and a bare GPU machine may
# lack (Google Benchmark, Kokkos) next to them, so that `build/<preset>/bin` can be copied
# to such a machine and run there as it is (executables carry RPATH $ORIGIN).
#   tools/gpu/bundle_runtime_libs.sh build/cuda/bin
set -euo pipefail
bin="${1:?usage: $0 BUILD/bin}"
for exe in "$bin"/test_* "$bin"/bench_* "$bin"/trace_*; do
  [ -x "$exe" ] || continue
  ldd "$exe" | awk '/=> \// {print $3}' | grep -E 'libbenchmark|kokkos|libgtest|libfmt' || true
done | sort -u | while read -r lib; do
  [ "$(dirname "$(readlink -f "$lib")")" = "$(readlink -f "$bin")" ] && continue
  cp -L "$lib" "$bin/"
  echo "bundled $(basename "$lib")"
done
