#!/usr/bin/env bash
# Builds the plugin with Bazel (offline), runs its native tests (unit tests and the C API smoke
# test), checks that an upward include does not build, checks what the library exports and
# needs, then runs JAX on the Bazel-built library.
# Usage: .ci/bazel_check.sh PYTHON   (a python with xla-cpu-pjrt, jax and pytest, e.g. .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${1:?usage: $0 PYTHON (the python that has xla-cpu-pjrt, jax and pytest installed)}"
# Absolute, so Bazel's repository rule runs the same interpreter as pytest does. Not resolved
# through symlinks: a venv's python only works by its own name.
case "$PYTHON" in
  /*) ;;
  */*) PYTHON="$PWD/$PYTHON" ;;
  *) PYTHON="$(command -v "$PYTHON")" ;;
esac

if ! command -v bazel >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bazel-bootstrap >/dev/null
fi
if [[ ! -f /usr/include/gtest/gtest.h ]]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev >/dev/null
fi
echo "bazel-bootstrap $(dpkg-query -W -f='${Version}' bazel-bootstrap 2>/dev/null || echo '(not from dpkg)'); $(bazel --version)"

# Read by bazel/repositories.bzl to find pjrt_c_api.h and xla_cpu_pjrt.so.
export PJRT_NEURON_PYTHON="$PYTHON"
# The Bazel server would otherwise outlive this script.
trap 'bazel shutdown' EXIT

bazel build //plugin:pjrt_neuron //plugin:pjrt-neuron-instanced
bazel test //plugin/tests/...
bash .ci/layering_check.sh bazel

# bazel-bin points at the configuration of the last build, the one .bazelrc sets.
LIBRARY="$PWD/bazel-bin/plugin/libpjrt_neuron.so"

exports="$(nm -D --defined-only "$LIBRARY" | awk '{print $NF}' | sort | tr '\n' ' ')"
# What plugin/exports.lds lists as global, the one list both builds link with.
listed="$(sed -n '/global:/,/local:/p' plugin/exports.lds | tr -s ' ;:\t' '\n' |
  grep -E '^(GetPjrtApi|PjrtNeuron_[A-Za-z]+)$' | sort | tr '\n' ' ')"
if [[ -z "$listed" || "$exports" != "$listed" ]]; then
  echo "$LIBRARY must export only what plugin/exports.lds lists ($listed); it exports:" >&2
  echo "$exports" >&2
  exit 1
fi
# libstdc++ is linked in statically, so no GLIBCXX/CXXABI version can be missing on a host.
needed="$(readelf -d "$LIBRARY" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
versions="$(objdump -T "$LIBRARY" | grep -oE '(GLIBCXX|CXXABI)_[0-9.]+' | sort -u | tr '\n' ' ' || true)"
if [[ "$needed" == *libstdc++* || -n "$versions" ]]; then
  echo "$LIBRARY depends on the shared libstdc++: needs $needed; symbol versions $versions" >&2
  exit 1
fi
echo "$LIBRARY exports only $exports and needs $needed"

PJRT_NEURON_LIBRARY_PATH="$LIBRARY" "$PYTHON" -m pytest -q tests/test_bazel_build.py
