#!/usr/bin/env bash
# The CMake build of the native tests: GoogleTest unit tests and the C API smoke test under
# ctest, then the layering probes (.ci/layering_check.sh).
# Usage: .ci/native_check.sh PYTHON   (the python whose site-packages hold xla-cpu-pjrt)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:?usage: $0 PYTHON}"
# Absolute: CMake would read a relative path from its build directory.
case "$PYTHON" in
  /*) ;;
  */*) PYTHON="$PWD/$PYTHON" ;;
  *) PYTHON="$(command -v "$PYTHON")" ;;
esac
if [[ ! -f /usr/include/gtest/gtest.h ]]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev >/dev/null
fi
BUILD_DIR="build/native-tests"
cmake -S plugin -B "$BUILD_DIR" -DPJRT_NEURON_BUILD_TESTS=ON -DPython3_EXECUTABLE="$PYTHON" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)")
bash .ci/layering_check.sh cmake "$BUILD_DIR"
