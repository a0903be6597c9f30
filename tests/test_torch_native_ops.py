"""PyTorch's op database on the native `neuron` device (tests/native_torch_ops.py is the runner).

Every op in native_torch_ops_passing.txt must still match the CPU, forward and backward (pytest's
count of these tests is the census of the expected ops). The whole op_db census, with the ops that
fail or are refused, is a command: `python tests/native_torch_ops.py`; its figures are in README.
"""

import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 10):
    pytest.skip("the native neuron device needs torch >= 2.10 (it runs in .ci/run's current-PyTorch venv)",
                allow_module_level=True)
pytest.importorskip("torch_mlir")
pytest.importorskip("expecttest")  # torch.testing._internal needs it

sys.path.insert(0, str(Path(__file__).resolve().parent))
import native_torch_ops  # noqa: E402


def _expected():
    """The expected list, or every n-th op of it with PJRT_NEURON_OP_DB_SHARE=1/n (CI runs a quarter:
    the whole list takes about an hour on two cores; `python tests/native_torch_ops.py` runs all)."""
    rows = [tuple(line.split()) for line in native_torch_ops.PASSING_LIST.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    share = os.environ.get("PJRT_NEURON_OP_DB_SHARE", "1/4")
    step = int(share.split("/")[1]) if "/" in share else 1
    return rows[::step]


EXPECTED = _expected()


@pytest.mark.parametrize("name, dtype", EXPECTED, ids=[f"{n}-{d}" for n, d in EXPECTED])
def test_op_matches_the_cpu(name, dtype):
    op = native_torch_ops.operators()[name]
    outcome, detail = native_torch_ops.check(op, native_torch_ops.DTYPES[dtype])
    assert outcome == "passed", detail
