# SPDX-License-Identifier: Apache-2.0
"""pytest for the Python module: run with the built package on the path,

    PYTHONPATH=build/<preset>/python python3 -m pytest tests/python -q

test_arguments.py needs no GPU (NumPy arrays through DLPack; the ``on_device`` fixture's
arrays claim a GPU device, to reach the checks after the device's); test_examples.py needs
neither a GPU nor PyTorch; test_gpu.py needs PyTorch with a GPU and skips, with the reason,
without one.
"""

import ctypes

import numpy as np
import pytest

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class OnDevice:
    """A NumPy array whose DLPack export says it is on device 0 of the module's backend
    (kDLCUDA or kDLROCM), so the checks after the device check run without a GPU. Its data
    stays in host memory: use it only for calls that must fail before anything is launched."""

    def __init__(self, array):
        self.array = array

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)

    def __dlpack_device__(self):
        import flashsteps  # here, not at the top: test_examples.py runs without the module
        return (flashsteps._ext.dlpack_device_type, 0)

    def __dlpack__(self, **kwargs):
        capsule = self.array.__dlpack__(**{k: v for k, v in kwargs.items() if k == "max_version"})
        name = _capsule_name(capsule)
        # DLManagedTensorVersioned: version, manager_ctx, deleter, flags (8 bytes each), then
        # the DLTensor; DLManagedTensor starts with it. DLTensor: data, then DLDevice {type, id}.
        tensor = _capsule_pointer(capsule, name) + (32 if name == b"dltensor_versioned" else 0)
        ctypes.c_int32.from_address(tensor + 8).value = self.__dlpack_device__()[0]
        ctypes.c_int32.from_address(tensor + 12).value = 0
        return capsule


@pytest.fixture
def on_device():
    """on_device(shape=(1, 2, 8, 16), dtype=np.float16, writeable=True): zeros as an OnDevice."""
    def make(shape=(1, 2, 8, 16), dtype=np.float16, writeable=True):
        array = np.zeros(shape, dtype=dtype)
        array.flags.writeable = writeable
        return OnDevice(array)
    return make
