# SPDX-License-Identifier: Apache-2.0
"""pytest for the Python module: run with the built package on the path,

    PYTHONPATH=build/<preset>/python python3 -m pytest tests/python -q

test_arguments.py needs no GPU (NumPy arrays through DLPack); test_gpu.py needs PyTorch
with a GPU and skips, with the reason, without one.
"""
