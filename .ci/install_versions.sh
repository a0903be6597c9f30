#!/usr/bin/env bash
# Installs the older framework versions of the tested range side by side (tests/test_version_range.py):
# each one alone, with `pip install --target`, so it runs in front of the test venv's packages.
# Usage: .ci/install_versions.sh PYTHON DIR
set -euo pipefail
PYTHON="${1:?usage: $0 PYTHON DIR}"
DIR="${2:?usage: $0 PYTHON DIR}"
mkdir -p "$DIR"
install() {  # install NAME REQUIREMENT...
  local name="$1"; shift
  if [[ -f "$DIR/$name/.complete" ]]; then return; fi
  rm -rf "$DIR/$name"
  "$PYTHON" -m pip install --quiet --no-deps --target "$DIR/$name" "$@"
  touch "$DIR/$name/.complete"
}
for version in 0.7.2 0.8.2 0.9.2; do
  install "jax-$version" "jax==$version" "jaxlib==$version"
done
# torch-xla needs its own torch exactly.
install "torch-xla-2.8.1" "torch==2.8.0" "torch_xla==2.8.1"
# The native neuron device's older PyTorch (tests/test_torch_native.py), run in front of .venv's 2.14.1.
install "torch-2.13.0" "torch==2.13.0"
