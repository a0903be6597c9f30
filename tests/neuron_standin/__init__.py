"""The Neuron runtime (libnrt.so.1) and compiler (neuronx-cc) stand-in: tests only.

Never installed, never selected outside tests/ (see README.md).
"""
