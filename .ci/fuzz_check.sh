#!/usr/bin/env bash
# Builds the libFuzzer targets (plugin/fuzz) with Debian's clang and runs each from its seed
# corpus for a while; a crash, a sanitizer report or a leak fails the run and leaves the input
# in build/fuzz/crashes.
# Usage: .ci/fuzz_check.sh PYTHON [SECONDS_PER_TARGET]   (the python that has xla-cpu-pjrt)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:?usage: $0 PYTHON [SECONDS_PER_TARGET]}"
SECONDS_PER_TARGET="${2:-10}"
case "$PYTHON" in
  /*) ;;
  */*) PYTHON="$PWD/$PYTHON" ;;
  *) PYTHON="$(command -v "$PYTHON")" ;;
esac
if ! command -v clang++-14 >/dev/null 2>&1 || [[ ! -d /usr/lib/llvm-14/lib/clang ]] ||
   ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
BUILD_DIR="build/fuzz"
TARGETS=(daemon_frames module_view compile_options topology cache_entry neff_program)
cmake -S plugin -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER=clang++-14 -DPJRT_NEURON_FUZZ=ON -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS=-O1 -DPython3_EXECUTABLE="$PYTHON" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${TARGETS[@]/%/_fuzzer}"
mkdir -p "$BUILD_DIR/crashes"
for target in "${TARGETS[@]}"; do
  # A scratch copy of the seeds: what the run finds stays out of the repository.
  corpus="$BUILD_DIR/corpus/$target"
  rm -rf "$corpus" && mkdir -p "$corpus" && cp plugin/fuzz/corpus/"$target"/* "$corpus"/
  log="$BUILD_DIR/$target.log"
  if ! "$BUILD_DIR/fuzz/${target}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=2048 \
      -artifact_prefix="$BUILD_DIR/crashes/$target-" "$corpus" >"$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz: $target FAILED; the input is in $BUILD_DIR/crashes"
    exit 1
  fi
  echo "fuzz: $target $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1), no crash"
done
