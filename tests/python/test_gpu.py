# SPDX-License-Identifier: Apache-2.0
"""Every built step against PyTorch SDPA's math backend in float64, on the very same tensors.

Q, K ~ N(0, 1) and V ~ N(0.5, 1) (V offset so O stays away from zero, as in the
conformance suite) are made once per case; the step reads them through DLPack, and the
reference is ``scaled_dot_product_attention`` with the math backend on their float64
copies. Cases: fp16 and bf16; D = 64, 128 and 80 (an odd size every step pads); GQA and
MQA by head counts; no mask and both causal alignments, bottom-right through an explicit
boolean mask on the PyTorch side (``is_causal=True`` is top-left); BHSD tensors and BSHD
views (``x.transpose(1, 2)``); Nq != Nk both ways, with rows that see no key. The
tolerances are those of the conformance suite (common/src/compare.cpp). Then the outputs
(``out=``, LSE), streams, a CUDA graph capture, and the errors that need a GPU.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no GPU visible to PyTorch: the GPU tests are skipped", allow_module_level=True)

import flashsteps  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

STEPS = flashsteps.steps()
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# (max abs error x max(1, |ref|), relative Frobenius error): tolerance() of compare.cpp.
TOLERANCE = {"fp16": (2e-3, 1e-3), "bf16": (1.6e-2, 8e-3), "fp32": (1e-5, 1e-5)}
# (batch, heads_q, heads_kv, seqlen_q, seqlen_k, layout)
SHAPES = {
    "mha-256-bhsd": (2, 4, 4, 256, 256, "bhsd"),
    "gqa-200x333-bshd": (1, 8, 2, 200, 333, "bshd"),
    "gqa-333x200-bshd": (2, 6, 3, 333, 200, "bshd"),
    "mqa-1x777-bhsd": (1, 4, 1, 1, 777, "bhsd"),
}
MASKS = {"none": False, "bottom_right": "bottom_right", "top_left": "top_left"}


def step_ids(steps):
    return [f"step{s.index:02d}" for s in steps]


def make(shape, heads, seqlen, head_dim, dtype, layout, offset=0.0, seed=0):
    """A [B, H, N, D] tensor: contiguous (bhsd) or a view of [B, N, H, D] storage (bshd)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    if layout == "bshd":
        x = torch.randn(shape, seqlen, heads, head_dim, device="cuda", generator=gen) + offset
        return x.to(dtype).transpose(1, 2)
    x = torch.randn(shape, heads, seqlen, head_dim, device="cuda", generator=gen) + offset
    return x.to(dtype)


def inputs(case, head_dim, dtype):
    b, hq, hkv, nq, nk, layout = SHAPES[case]
    q = make(b, hq, nq, head_dim, dtype, layout, seed=1)
    k = make(b, hkv, nk, head_dim, dtype, layout, seed=2)
    v = make(b, hkv, nk, head_dim, dtype, layout, offset=0.5, seed=3)
    return q, k, v


def visible(mask, nq, nk):
    """[Nq, Nk] bool: key j visible to query i (attention.h, last_visible_key)."""
    i = torch.arange(nq, device="cuda")[:, None]
    j = torch.arange(nk, device="cuda")[None, :]
    if mask == "bottom_right":
        return j <= i + nk - nq
    if mask == "top_left":
        return j <= i
    return torch.ones(nq, nk, dtype=torch.bool, device="cuda")


def reference(q, k, v, mask, scale=None):
    """float64 O and LSE from SDPA's math backend on the same tensors. GQA: K and V heads
    repeated; bottom-right and top-left both as an explicit mask. Rows that see no key: O = 0
    and LSE = -inf (the contract; SDPA would give NaN)."""
    group = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    seen = visible(mask, q.shape[2], k.shape[2])
    s = 1.0 / math.sqrt(q.shape[3]) if scale is None else scale
    with sdpa_kernel([SDPBackend.MATH]):
        o = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, attn_mask=seen, scale=s)
    logits = (qd @ kd.transpose(-1, -2)) * s
    lse = torch.logsumexp(logits.masked_fill(~seen, float("-inf")), dim=-1)
    empty = ~seen.any(dim=1)  # [Nq]
    o[:, :, empty, :] = 0.0
    lse[:, :, empty] = float("-inf")
    return o, lse


def assert_close(o, ref, dtype_name, what):
    abs_tol, rel_tol = TOLERANCE[dtype_name]
    od = o.double()
    assert bool(torch.isfinite(od).all()), f"{what}: NaN or inf in O"
    diff = od - ref
    max_abs, ref_max = float(diff.abs().max()), float(ref.abs().max())
    ref2, diff2 = float((ref * ref).sum()), float((diff * diff).sum())
    rel = math.sqrt(diff2 / ref2) if ref2 > 0 else math.sqrt(diff2)
    assert max_abs <= abs_tol * max(1.0, ref_max), f"{what}: max abs error {max_abs:.3g}"
    assert rel <= rel_tol, f"{what}: relative Frobenius error {rel:.3g}"


def assert_lse(lse, ref, head_dim, what):
    """The conformance suite's LSE limit: max(1e-3, (D + 4) 2^-24 |LSE|), -inf where it is."""
    inf = torch.isinf(ref)
    assert bool(torch.equal(torch.isinf(lse) & (lse < 0), inf)), f"{what}: -inf rows differ"
    d = (lse.double() - ref)[~inf].abs()
    lim = torch.clamp((head_dim + 4) * 2.0**-24 * ref[~inf].abs(), min=1e-3)
    assert bool((d <= lim).all()), f"{what}: LSE error {float(d.max()):.3g}"


def runs(step, dtype_name, head_dim):
    """Whether the step declares this case (StepInfo); otherwise it must refuse it."""
    return (head_dim <= step.max_head_dim and head_dim % step.head_dim_multiple == 0
            and (dtype_name != "fp32" or step.accepts_fp32))


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("case", list(SHAPES))
@pytest.mark.parametrize("head_dim", [64, 128, 80])
@pytest.mark.parametrize("dtype_name", ["fp16", "bf16"])
@pytest.mark.parametrize("step", STEPS, ids=step_ids(STEPS))
def test_against_sdpa_float64(step, dtype_name, head_dim, case, mask):
    if step.index == 7 and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("step 07 runs on sm_90 only")
    q, k, v = inputs(case, head_dim, DTYPES[dtype_name])
    o, lse = flashsteps.attention(q, k, v, step=step.index, causal=MASKS[mask], return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and o.device == q.device
    assert o.stride() == torch.empty_like(q).stride()  # a BSHD view's output is BSHD too
    ref_o, ref_lse = reference(q, k, v, mask)
    what = f"step {step.index:02d} {dtype_name} D={head_dim} {case} {mask}"
    assert_close(o, ref_o, dtype_name, what)
    assert_lse(lse, ref_lse, head_dim, what)


@pytest.mark.parametrize("step", [s for s in STEPS if s.accepts_fp32], ids=step_ids([s for s in STEPS if s.accepts_fp32]))
def test_fp32_and_explicit_scale(step):
    q, k, v = inputs("gqa-200x333-bshd", 37, torch.float32)
    o = flashsteps.attention(q, k, v, step=step.index, causal="top_left", scale=0.3)
    ref_o, _ = reference(q, k, v, "top_left", scale=0.3)
    assert_close(o, ref_o, "fp32", f"step {step.index:02d} fp32 D=37")


@pytest.mark.parametrize("step", STEPS, ids=step_ids(STEPS))
def test_out_in_place_and_side_stream(step):
    if step.index == 7 and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("step 07 runs on sm_90 only")
    q, k, v = inputs("gqa-333x200-bshd", 64, torch.bfloat16)
    out = torch.empty(q.shape[0], q.shape[2], q.shape[1], 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # enqueued on the current stream, which is now `side`
        got = flashsteps.attention(q, k, v, step=step.index, causal=True, out=out)
    torch.cuda.current_stream().wait_stream(side)
    assert got is out
    ref_o, _ = reference(q, k, v, "bottom_right")
    assert_close(out, ref_o, "bf16", f"step {step.index:02d} out= on a side stream")


@pytest.mark.parametrize("step", STEPS, ids=step_ids(STEPS))
def test_cuda_graph_capture(step):
    if step.index == 7 and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("step 07 runs on sm_90 only")
    q, k, v = inputs("mha-256-bhsd", 128, torch.float16)
    flashsteps.attention(q, k, v, step=step.index, causal=True)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = flashsteps.attention(q, k, v, step=step.index, causal=True, return_lse=True)
    for seed in (5, 6):  # new inputs in the captured tensors, then replay
        q.copy_(inputs("mha-256-bhsd", 128, torch.float16)[0] * (seed - 4))
        graph.replay()
        torch.cuda.synchronize()
        ref_o, ref_lse = reference(q, k, v, "bottom_right")
        assert_close(o, ref_o, "fp16", f"step {step.index:02d} graph replay")
        assert_lse(lse, ref_lse, 128, f"step {step.index:02d} graph replay")


def test_default_step_is_the_last():
    q, k, v = inputs("mha-256-bhsd", 64, torch.float16)
    if STEPS[-1].index == 7 and torch.cuda.get_device_capability() != (9, 0):
        with pytest.raises(NotImplementedError):
            flashsteps.attention(q, k, v)
        return
    torch.testing.assert_close(flashsteps.attention(q, k, v), flashsteps.attention(q, k, v, step=STEPS[-1].index))


def test_inputs_that_require_grad():
    q, k, v = inputs("mha-256-bhsd", 64, torch.float16)
    o = flashsteps.attention(q.requires_grad_(), k, v, step=STEPS[0].index)
    assert not o.requires_grad
    assert_close(o, reference(q.detach(), k, v, "none")[0], "fp16", "requires_grad input")


def test_errors_on_the_gpu():
    q, k, v = inputs("mha-256-bhsd", 64, torch.float16)
    with pytest.raises(ValueError, match=r"^step = 99 is not built"):
        flashsteps.attention(q, k, v, step=99)
    with pytest.raises(ValueError, match=r"k: tensor is on CPU"):
        flashsteps.attention(q, k.cpu(), v)
    wide = torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"q\.stride\[3\]"):  # a non-unit head_dim stride
        flashsteps.attention(wide[..., ::2], k, v, step=STEPS[0].index)
    with pytest.raises(ValueError, match=r"dtype"):  # one dtype for Q, K, V, O
        flashsteps.attention(q, k.to(torch.bfloat16), v, step=STEPS[0].index)
    with pytest.raises(ValueError, match=r"k\.shape\[1\]|heads"):  # 4 query heads, 3 KV heads
        flashsteps.attention(q, k[:, :3], v[:, :3], step=STEPS[0].index)
    tc = [s for s in STEPS if not s.accepts_fp32]
    if tc:
        with pytest.raises(NotImplementedError, match=r"q\.dtype"):
            flashsteps.attention(q.float(), k.float(), v.float(), step=tc[0].index)
        big = torch.randn(1, 1, 16, 264, device="cuda", dtype=torch.float16)
        with pytest.raises(NotImplementedError, match=r"q\.shape\[3\]"):
            flashsteps.attention(big, big, big, step=tc[0].index)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one GPU: mismatched devices are not tried")
def test_mismatched_devices():
    q, k, v = inputs("mha-256-bhsd", 64, torch.float16)
    with pytest.raises(ValueError, match=r"^k: on (CUDA|ROCm) device 1, but q is on (CUDA|ROCm) device 0"):
        flashsteps.attention(q, k.to("cuda:1"), v)
