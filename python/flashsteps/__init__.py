# SPDX-License-Identifier: Apache-2.0
"""Every FlashSteps step, callable from Python on PyTorch (or any DLPack) tensors.

    import torch, flashsteps
    q = torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16)
    k = v = torch.randn(2, 2, 1024, 128, device="cuda", dtype=torch.bfloat16)   # GQA 8:2
    o = flashsteps.attention(q, k, v, causal="bottom_right")          # the last built step
    o, lse = flashsteps.attention(q, k, v, step=4, return_lse=True)   # step 04
    [s.index for s in flashsteps.steps()]                             # the built steps: [1, 2, ..., 10]

Tensors are read through DLPack (``__dlpack__``) without a copy: data pointer, shape and
strides as they are, so a ``[B, N, H, D]`` (BSHD) tensor passed as ``x.transpose(1, 2)`` is
used in place. The outputs are allocated in the framework of ``q`` (PyTorch: its caching
allocator, so a call can be captured in a CUDA graph).

Stream: a call is enqueued on the caller's current stream. With PyTorch tensors that is
``torch.cuda.current_stream(q.device)`` (so ``with torch.cuda.stream(s):`` and graph capture
work as for any PyTorch operation); for other frameworks pass ``stream=`` (the
``cudaStream_t``/``hipStream_t`` as an int), else the default stream (0) is used. The call is
asynchronous like any kernel launch; nothing is synchronised.

Errors keep the library's messages, which name the offending field (``q.shape[3]``,
``k.stride[2]``, ...): ``flashsteps::InvalidArgument`` is raised as ``ValueError``,
``Unsupported`` (a case the step does not implement) as ``NotImplementedError``,
``DeviceError`` as ``RuntimeError``. An argument that is not a tensor is a ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
from typing import Any

from . import _flashsteps as _ext

__all__ = ["StepInfo", "attention", "steps", "backend"]

#: The runtime the steps were compiled for: "CUDA" or "HIP".
backend: str = _ext.backend

_MASKS = {False: "none", None: "none", "none": "none",
          True: "causal_bottom_right", "bottom_right": "causal_bottom_right",
          "top_left": "causal_top_left"}


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """What a step says about itself (``flashsteps::StepInfo``, common/include/flashsteps/step.h).

    A call inside these limits is implemented; one outside raises NotImplementedError.
    """

    index: int               #: 1, 2, ...: the step number, the ``step=`` of attention()
    slug: str                #: "naive", "tiled", ...
    summary: str             #: one line: what this step adds
    bench_max_seqlen: int    #: longest seqlen the benchmark times for it (0: no cap)
    max_head_dim: int        #: largest head_dim accepted (every head_dim from 1 up to it)
    accepts_fp32: bool       #: float32 inputs accepted (the tensor-core steps: fp16/bf16 only)
    head_dim_multiple: int   #: head_dim must be a multiple of this
    alignment_elems: int     #: data and batch/head/seq strides: multiples of this many elements


def steps() -> list[StepInfo]:
    """The steps built into this module, in order, each with its StepInfo."""
    return [StepInfo(**d) for d in _ext.steps()]


def _check_tensors(named: list[tuple[str, Any]]) -> None:
    """TypeError for a non-tensor, then ValueError for a bad rank, dtype or device, or for an
    output ``o`` exported read-only."""
    for name, x in named:
        if not hasattr(x, "__dlpack__"):
            raise TypeError(f"{name}: expected a tensor that implements __dlpack__ (PyTorch, CuPy, "
                            f"JAX, NumPy, ...), got {type(x).__name__}")
    for name, x in named:
        try:
            _ext.check_tensor(name, x)  # rank, dtype, then device: ValueError naming the field
        except TypeError as exc:  # __dlpack__ raised, or exported something nanobind cannot take
            raise TypeError(f"{name}: its __dlpack__ export is not a tensor flashsteps can read "
                            f"({type(x).__name__}: {str(exc).splitlines()[0]})") from None
        if name == "o":
            _ext.check_writable(name, x)  # else nanobind refuses forward() naming no field


def _check_scale(scale: Any) -> float | None:
    """The scale as the float passed on, or ValueError naming it: one float64 cannot hold
    (10**400 and Fraction(1, 10**400) alike), or one float32 cannot
    (softmax_scale_from_double() in C++: 1e-50, 1e300, nan, -1)."""
    if scale is None:
        return None
    text = repr(scale)
    if len(text) > 24:  # 10**400: not its 401 digits
        text = f"{text[:12]}... ({len(text)} characters)"
    try:
        value = float(scale)
    except OverflowError:
        raise ValueError(f"scale = {text} overflows float64 (and float32, the type the steps "
                         f"compute in)") from None
    if value == 0.0 and scale > 0:  # a positive rational too small for float64
        raise ValueError(f"scale = {text} underflows float64 (and float32, the type the steps "
                         f"compute in): it would become 0")
    _ext.check_scale(value)
    return value


def _torch_of(x: Any):
    """The torch module when ``x`` is a torch.Tensor, else None (never imports torch)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(x, torch.Tensor) else None


def _empty_like(q: Any, shape: tuple[int, ...], kind: str):
    """A new tensor of q's framework and device: ``kind`` "like_q" (q's dtype and, for
    PyTorch, its memory layout), "float32" or "bytes" (uint8)."""
    torch = _torch_of(q)
    if torch is not None:
        if kind == "like_q":
            return torch.empty_like(q)  # keeps a BSHD view's layout: O comes back BSHD too
        dtype = torch.float32 if kind == "float32" else torch.uint8
        return torch.empty(shape, dtype=dtype, device=q.device)
    if hasattr(q, "__array_namespace__"):  # the array API standard (CuPy, JAX, ...)
        xp = q.__array_namespace__()
        dtype = {"like_q": q.dtype, "float32": xp.float32, "bytes": xp.uint8}[kind]
        return xp.empty(shape, dtype=dtype, device=q.device)
    needs = {"like_q": "pass out=", "float32": "use return_lse=False",
             "bytes": "this step needs a workspace (steps 01, 09 and 10 do), which cannot be allocated there: use a step that needs none"}[kind]
    raise TypeError(f"q: cannot allocate {'the output' if kind == 'like_q' else 'the LSE' if kind == 'float32' else 'scratch memory'} "
                    f"in the framework of {type(q).__name__} (neither a torch.Tensor nor an "
                    f"array-API array): {needs}")


def attention(q: Any, k: Any, v: Any, *, step: int | None = None,
              causal: bool | str = False, scale: float | None = None,
              return_lse: bool = False, out: Any = None, stream: int | None = None):
    """Attention forward with one FlashSteps step: ``O = softmax(scale * Q Kᵀ) V``.

    Args:
        q: queries ``[B, Hq, Nq, D]``.
        k: keys ``[B, Hkv, Nk, D]``; Hq must be a multiple of Hkv (GQA/MQA: query head h
            reads key/value head ``h // (Hq // Hkv)``).
        v: values ``[B, Hkv, Nk, D]``.
            q, k and v: tensors on one CUDA (or ROCm) device exposing ``__dlpack__``, one
            dtype (float16, bfloat16, or float32 for steps 01-03), any element strides
            with a unit head_dim stride (BHSD, BSHD via ``x.transpose(1, 2)``, views of a
            packed QKV buffer); the tensor-core steps (04 on) also need 16-byte aligned
            data, batch/head/seq strides that are multiples of 8 elements and D a multiple
            of 8 (see ``steps()``).
        step: the step number (an ``int``, an ``index`` of ``steps()``); default: the last step
            built (in a full build step 10, the split-KV step built on step 06, which takes
            every problem; pass ``step=9`` for the fastest prefill kernel on an H100/H200).
        causal: ``False`` (no mask); ``"bottom_right"`` (key j visible to query i when
            ``j <= i + Nk - Nq``, FlashAttention's convention; ``True`` means this);
            ``"top_left"`` (``j <= i``, PyTorch's ``is_causal=True``). They agree when
            Nq == Nk. A query row that sees no key gets O = 0 and LSE = -inf.
        scale: softmax scale; default ``1 / sqrt(D)``. Used as given (as float32): finite and
            positive, also once in float32 (not 1e-50, which is 0 there, nor 1e300).
        return_lse: also return the log-sum-exp (natural log) of each query row.
        out: optional output ``[B, Hq, Nq, D]`` of q's dtype and device, writable, written in
            place (any strides with a unit head_dim stride). Default: a new tensor like q (same
            layout for PyTorch tensors).
        stream: the stream to enqueue on, as an int handle (``0 <= stream < 2**64``); default:
            the current PyTorch stream of q's device for torch tensors, else 0 (the default stream).

    Returns:
        O ``[B, Hq, Nq, D]`` (q's framework, dtype and device), or ``(O, LSE)`` with LSE a
        contiguous float32 ``[B, Hq, Nq]`` tensor when ``return_lse``. Forward only: inputs
        that require grad are read as they are, and the outputs carry no autograd history.

    Raises:
        TypeError: an argument is not a DLPack tensor, or step, stream, scale or return_lse
            is not of its type (an int, an int, a real number, a bool).
        ValueError: a tensor is on the CPU or another device, is not 4-d, has another dtype,
            the shapes or strides break the contract, ``out`` is read-only, the step is not
            built, the scale is not a finite positive float32 or the stream not a 64-bit handle
            (the message names the field: ``q.shape[3]``, ``k.stride[2]``, ``o`` for ``out``,
            ``scale``, ``stream``, ...).
        NotImplementedError: the step does not implement this case (dtype, head_dim, GPU).
        RuntimeError: a launch or runtime call failed.
    """
    built = [s["index"] for s in _ext.steps()]
    if step is None:
        if not built:
            raise ValueError("step: no step is built into this module")
        step = built[-1]
    elif isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"step = {step!r}: expected an int, one of the steps built ({', '.join(map(str, built))})")
    elif step not in built:
        raise ValueError(f"step = {step} is not built into this module (built: {', '.join(map(str, built)) or 'none'})")
    step = int(step)
    if causal is not None and not isinstance(causal, (bool, str)):  # 1 == True: no ints
        raise ValueError(f"causal = {causal!r}: expected False, True, 'bottom_right' or 'top_left'")
    try:
        mask = _MASKS[causal]
    except (KeyError, TypeError):
        raise ValueError(f"causal = {causal!r}: expected False, True, 'bottom_right' or 'top_left'") from None
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse = {return_lse!r}: expected True or False")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise TypeError(f"scale = {scale!r}: expected a real number or None")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, numbers.Integral)):
        raise TypeError(f"stream = {stream!r}: expected an int stream handle or None")
    if stream is not None and not 0 <= stream < 2**64:  # a cudaStream_t/hipStream_t is an address
        raise ValueError(f"stream = {stream}: a stream handle is an address, 0 <= stream < 2**64")
    scale = _check_scale(scale)
    torch = _torch_of(q)
    returned_out = out  # the caller's own tensor object is what comes back (result is out)
    if torch is not None:  # PyTorch exports no tensor that requires grad; the step only reads them
        q, k, v = (x.detach() if isinstance(x, torch.Tensor) else x for x in (q, k, v))
        if isinstance(out, torch.Tensor):
            out = out.detach()  # written in place: the same storage, without autograd
    _check_tensors([("q", q), ("k", k), ("v", v)] + ([("o", out)] if out is not None else []))
    if stream is None:
        stream = torch.cuda.current_stream(q.device).cuda_stream if torch is not None else 0
    stream = int(stream)
    o = out if out is not None else _empty_like(q, tuple(q.shape), "like_q")
    result = returned_out if returned_out is not None else o
    lse = _empty_like(q, tuple(q.shape[:3]), "float32") if return_lse else None
    need = _ext.forward(step, q, k, v, o, lse, None, mask, scale, stream)
    if need:  # a workspace (step 01: its S/P matrix, 09: its tile counter, 10: the split partials): allocate it and call again
        workspace = _empty_like(q, (need,), "bytes")
        _ext.forward(step, q, k, v, o, lse, workspace, mask, scale, stream)
    return (result, lse) if return_lse else result
