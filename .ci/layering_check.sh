#!/usr/bin/env bash
# Shows that the layer rule is enforced by both builds: every "fails" probe (an include that runs
# against the layers' direction, plugin/tests/layering/) must fail to compile with the header not
# found, and every "builds" probe must compile.
# Usage: .ci/layering_check.sh cmake BUILD_DIR   (a CMake build configured with -DPJRT_NEURON_BUILD_TESTS=ON)
#        .ci/layering_check.sh bazel
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:?usage: $0 cmake BUILD_DIR | bazel}"
failures=0

check() {  # check NAME EXPECTATION OUTPUT-FILE STATUS
  local name="$1" expectation="$2" log="$3" status="$4"
  if [[ "$expectation" == fails ]]; then
    if [[ "$status" -eq 0 ]]; then
      echo "LAYERING: $name built, but its include runs upward" >&2; failures=$((failures + 1))
    elif ! grep -q "No such file or directory" "$log"; then
      echo "LAYERING: $name failed for another reason than the missing header:" >&2; cat "$log" >&2
      failures=$((failures + 1))
    else
      echo "ok: $name does not build ($(grep -o '[a-z_/]*\.h: No such file or directory' "$log" | head -1))"
    fi
  elif [[ "$status" -ne 0 ]]; then
    echo "LAYERING: control probe $name did not build:" >&2; cat "$log" >&2; failures=$((failures + 1))
  else
    echo "ok: $name builds"
  fi
}

log="$(mktemp)"
if [[ "$MODE" == cmake ]]; then
  BUILD_DIR="${2:?usage: $0 cmake BUILD_DIR}"
  while IFS=: read -r target expectation; do
    [[ -z "$target" ]] && continue
    status=0; cmake --build "$BUILD_DIR" --target "$target" >"$log" 2>&1 || status=$?
    check "cmake $target" "$expectation" "$log" "$status"
  done < "$BUILD_DIR/layering_probes.txt"
else
  for expectation in fails builds; do
    targets="$(bazel query "attr(tags, 'layering_$expectation', //plugin/tests:all)" 2>/dev/null)"
    [[ -n "$targets" ]] || { echo "LAYERING: no bazel probes tagged layering_$expectation" >&2; exit 1; }
    for target in $targets; do
      status=0; bazel build "$target" >"$log" 2>&1 || status=$?
      check "bazel $target" "$expectation" "$log" "$status"
    done
  done
fi
rm -f "$log"
if [[ "$failures" -ne 0 ]]; then
  echo "$failures layering probe(s) wrong" >&2
  exit 1
fi
