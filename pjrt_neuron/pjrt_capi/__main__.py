"""A quick manual check: python -m pjrt_neuron.pjrt_capi"""

import subprocess

from pjrt_neuron.pjrt_capi.header import _HEADER_PATH, API_FUNCTIONS, ENUMS, HEADER_VERSION, STRUCTS
from pjrt_neuron.pjrt_capi.layouts import _self_check_layouts, check_layouts_with_cc

print("header", _HEADER_PATH, "version", HEADER_VERSION)
print(len(STRUCTS), "structs,", len(ENUMS), "enums,",
      len(API_FUNCTIONS), "API functions")
print("self-check problems:", _self_check_layouts())
try:
    print("cc check mismatches:", check_layouts_with_cc())
except (FileNotFoundError, subprocess.CalledProcessError) as e:
    print("cc check skipped:", e)
