#!/usr/bin/env bash
# The C API tests, the multi-process C API tests (the instance daemon included) and the JAX
# tests against an AddressSanitizer + UndefinedBehaviorSanitizer build of the plugin. Any
# sanitizer report fails the run: each stops its process, and its log file fails the check.
# Usage: .ci/sanitize_check.sh PYTHON   (a python with xla-cpu-pjrt, jax and pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:?usage: $0 PYTHON}"
case "$PYTHON" in
  /*) ;;
  */*) PYTHON="$PWD/$PYTHON" ;;
  *) PYTHON="$(command -v "$PYTHON")" ;;
esac
start=$(date +%s)
BUILD_DIR="${SANITIZE_BUILD_DIR:-build/sanitize}"  # another, for a build kept between runs
# -O1: a quarter of the -O3 build's compile time, and still the stack traces of a debug build.
cmake -S plugin -B "$BUILD_DIR" -DPJRT_NEURON_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS=-O1 -DPython3_EXECUTABLE="$PYTHON" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target pjrt_neuron pjrt_neuron_instanced
built=$(date +%s)

REPORTS="$(cd "$BUILD_DIR" && pwd)/reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
# Python is not built with the sanitizer: its runtime must be loaded before anything else.
# Leak checking is off: the interpreter and the frameworks keep their allocations until exit
# by design, and LeakSanitizer would report those (none of them the plugin's) at every exit.
export LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$REPORTS/ubsan"
export PJRT_NEURON_LIBRARY_PATH="$(cd "$BUILD_DIR" && pwd)/libpjrt_neuron.so"
status=0
# --capture=sys: a report is written to the process's real stderr (fd 2), and stays in the log
# even though it stops the process before pytest could print what it captured.
# Left out: the one test that caps its process's address space (RLIMIT_AS), which AddressSanitizer's
# shadow memory cannot live under.
"$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys \
  --deselect tests/test_capi_errors.py::test_output_too_large_for_memory_is_resource_exhausted tests/test_smoke_capi.py tests/test_capi_client.py \
  tests/test_capi_buffers.py tests/test_capi_execute.py tests/test_capi_layout.py tests/test_capi_errors.py \
  tests/test_multiprocess_capi.py tests/test_daemon_security.py tests/test_jax.py tests/test_capi_fast_path.py 2>&1 | tee "$REPORTS/../pytest.log" ||
  status=$?
unset LD_PRELOAD
reports=$(( $(find "$REPORTS" -type f | wc -l) + $(grep -c -E "runtime error:|ERROR: AddressSanitizer" "$REPORTS/../pytest.log" || true) ))
echo "sanitizer leg: build $((built - start)) s, tests $(($(date +%s) - built)) s, sanitizer reports: $reports"
if [[ "$reports" -ne 0 ]]; then
  for report in "$REPORTS"/*; do echo "== $report"; head -60 "$report"; done
  exit 1
fi
exit "$status"
