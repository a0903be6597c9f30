"""The tests' name for the package's ctypes PJRT client (pjrt_neuron/pjrt_capi/)."""

import sys

from pjrt_neuron import pjrt_capi as _client

sys.modules[__name__] = _client
