# SPDX-License-Identifier: Apache-2.0
"""The argument errors that need no GPU: arrays on the CPU, bad ranks, bad dtypes, things
that are not tensors. NumPy arrays reach the module through DLPack like any tensor."""

import shutil
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import flashsteps


def arr(shape=(1, 2, 8, 16), dtype=np.float16):
    return np.zeros(shape, dtype=dtype)


def test_import_and_steps():
    assert flashsteps.backend in ("CUDA", "HIP")
    steps = flashsteps.steps()
    assert steps, "the module has no step"
    assert [s.index for s in steps] == sorted(s.index for s in steps)
    for s in steps:
        assert isinstance(s, flashsteps.StepInfo) and s.slug and s.summary and s.max_head_dim > 0


@pytest.mark.parametrize("field", ["q", "k", "v"])
def test_cpu_array_is_refused_naming_the_field(field):
    with pytest.raises(ValueError, match=rf"^{field}: tensor is on CPU"):
        flashsteps._ext.check_tensor(field, arr())
    with pytest.raises(ValueError, match=r"^q: tensor is on CPU, but flashsteps runs on (CUDA|HIP) devices"):
        flashsteps.attention(arr(), arr(), arr())


@pytest.mark.parametrize("shape", [(2, 8, 16), (1, 1, 2, 8, 16), (16,)])
def test_bad_rank(shape):
    with pytest.raises(ValueError, match=rf"^q\.ndim = {len(shape)}: expected a \[B, H, N, D\] tensor"):
        flashsteps.attention(arr(shape), arr(), arr())


@pytest.mark.parametrize("dtype,name", [(np.float64, "float64"), (np.int32, "int32"), (np.uint8, "uint8"),
                                        (np.bool_, "bool"), (np.complex64, "complex64")])
def test_bad_dtype(dtype, name):
    with pytest.raises(ValueError, match=rf"^k\.dtype \({name}\): expected float16, bfloat16 or float32"):
        flashsteps._ext.check_tensor("k", arr(dtype=dtype))


def test_not_a_tensor():
    with pytest.raises(TypeError, match=r"^v: expected a tensor that implements __dlpack__"):
        flashsteps.attention(arr(), arr(), [[1.0]])


@pytest.mark.parametrize("causal", ["causal", "bottom-right", 2])
def test_bad_causal(causal):
    with pytest.raises(ValueError, match=r"^causal = "):
        flashsteps.attention(arr(), arr(), arr(), causal=causal)


def test_read_only_array_is_accepted_as_input():
    a = arr()
    a.flags.writeable = False
    with pytest.raises(ValueError, match=r"^q: tensor is on CPU"):  # got as far as the device
        flashsteps.attention(a, a, a)


def test_torch_cpu_tensor():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: its CPU tensors are not tried")
    x = torch.zeros(1, 2, 8, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"^q: tensor is on CPU"):
        flashsteps.attention(x, x, x)


def test_module_exports_only_its_entry_point():
    """The module keeps every library it links statically to itself: its only strong exported
    symbol is PyInit__flashsteps. A toolchain that links libstdc++ statically and exports it
    (the H200 machine's /opt/gcc did) makes the module's calls bind half to its own copy and
    half to the libstdc++.so.6 PyTorch loaded globally, and the first error message crashed in
    `std::ostream << size_t`. (Weak symbols are the module's own inline template copies.)"""
    nm = shutil.which("nm")
    if nm is None or sys.platform != "linux":
        pytest.skip("needs binutils' nm on Linux")
    lib = flashsteps._ext.__file__
    listing = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    strong = sorted(line.split()[-1] for line in listing.splitlines() if line.split()[-2] in "TDBR")
    # HIP's compiler gives every offloading translation unit a global __hip_cuid_<hash> byte
    # (its id for the offload bundle): not a library's symbol, and harmless.
    strong = [name for name in strong if not name.startswith("__hip_cuid_")]
    assert strong == ["PyInit__flashsteps"], f"{lib} exports {strong[:20]}"


@pytest.mark.parametrize("kwargs,error,text", [
    ({"step": True}, TypeError, r"^step = True: expected an int"),
    ({"step": 9.0}, TypeError, r"^step = 9\.0: expected an int"),
    ({"step": "9"}, TypeError, r"^step = '9': expected an int"),
    ({"step": 99}, ValueError, r"^step = 99 is not built into this module \(built: 1, "),
    ({"step": 0}, ValueError, r"^step = 0 is not built"),
    ({"causal": 1}, ValueError, r"^causal = 1: expected False, True"),
    ({"causal": 0.0}, ValueError, r"^causal = 0\.0: expected"),
    ({"return_lse": "yes"}, TypeError, r"^return_lse = 'yes': expected True or False"),
    ({"scale": True}, TypeError, r"^scale = True: expected a real number"),
    ({"scale": "0.1"}, TypeError, r"^scale = '0\.1': expected a real number"),
    ({"stream": "x"}, TypeError, r"^stream = 'x': expected an int stream handle"),
    ({"stream": 1.5}, TypeError, r"^stream = 1\.5: expected an int stream handle"),
    ({"stream": -1}, ValueError, r"^stream = -1: a stream handle is an address, 0 <= stream < 2\*\*64$"),
    ({"stream": 2**64}, ValueError, r"^stream = 18446744073709551616: a stream handle is an address"),
    ({"stream": 2**70}, ValueError, r"^stream = 1180591620717411303424: a stream handle is an address"),
    ({"scale": 10**400}, ValueError, r"^scale = 100000000000\.\.\. \(401 characters\) overflows float64 \(and float32"),
    ({"scale": Fraction(1, 10**400)}, ValueError,
     r"^scale = Fraction\(1, \.\.\. \(414 characters\) underflows float64 \(and float32"),
    ({"scale": 1e-50}, ValueError, r"^scale = 1e-50 underflows float32, the type the steps compute in \(it would become 0\)$"),
    ({"scale": 1e300}, ValueError, r"^scale = 1e\+300 overflows float32, the type the steps compute in \(it would become inf\)$"),
    ({"scale": float("nan")}, ValueError, r"^scale = nan must be finite and positive$"),
    ({"scale": -0.125}, ValueError, r"^scale = -0\.125 must be finite and positive$"),
    ({"scale": 3.4e38}, ValueError, r"^scale = 3\.4e\+38 is too large: scale \* log2\(e\) must be finite in float32 "
                                    r"\(scale <= 2\.3586574e\+38\)$"),
])
def test_bad_arguments_are_named_before_the_tensors_are_looked_at(kwargs, error, text):
    # CPU arrays would fail the tensor checks: the argument's own error must come first.
    with pytest.raises(error, match=text):
        flashsteps.attention(arr(), arr(), arr(), **kwargs)


def test_an_export_nanobind_cannot_take_names_the_field():
    structured = np.zeros((1, 2, 8, 16), dtype=[("a", np.float16), ("b", np.float16)])
    with pytest.raises(TypeError, match=r"^q: its __dlpack__ export is not a tensor flashsteps can read"):
        flashsteps.attention(structured, arr(), arr())


@pytest.mark.parametrize("kwargs", [{"stream": 2**64 - 1}, {"stream": 0}, {"scale": 1e-45}, {"scale": 2.3586574e38}])
def test_arguments_at_their_limits_reach_the_tensor_checks(kwargs):
    # The largest 64-bit handle; the smallest float32 subnormal and the largest scale whose
    # scale * log2(e) is finite in float32 (validate()'s limit): none is refused by its own check.
    with pytest.raises(ValueError, match=r"^q: tensor is on CPU"):
        flashsteps.attention(arr(), arr(), arr(), **kwargs)


@pytest.mark.parametrize("scale,text", [(1e-50, "1e-50 underflows float32"), (1e300, r"1e\+300 overflows float32"),
                                        (-1.0, "-1 must be finite and positive")])
def test_module_names_the_scale_as_given(on_device, scale, text):
    """The compiled module's own check, on tensors that pass theirs (they claim a GPU), shows the
    double it got, not its float32 (0 or inf). Nothing launches: the scale is refused first."""
    x = on_device()
    with pytest.raises(ValueError, match=rf"^scale = {text}"):
        flashsteps._ext.forward(flashsteps.steps()[-1].index, x, x, x, on_device(), None, None, "none", scale, 0)


def test_read_only_out_is_refused_naming_it(on_device):
    x = on_device()
    with pytest.raises(ValueError, match=r"^o: tensor is read-only, but the step writes its output there: "
                                         r"pass a writable tensor$"):
        flashsteps.attention(x, x, x, out=on_device(writeable=False))
    flashsteps._ext.check_tensor("o", x)  # the same array, writable, passes as a GPU tensor ...
    flashsteps._ext.check_writable("o", x)  # ... and as an output: only the read-only flag was refused
