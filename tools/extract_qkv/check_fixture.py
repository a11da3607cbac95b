#!/usr/bin/env python3
"""Check that a flashsteps-qkv-v1 fixture's .bin matches its .json. Standard library only.

Usage:
    python3 tools/extract_qkv/check_fixture.py [path/to/minilm_qkv.json]

The default path is tests/data/minilm_qkv.json of this repository. Checks: the JSON
has exactly the expected keys and fixed values, softmax_scale == 1/sqrt(head_dim),
the .bin (named by "bin", next to the JSON) has 3*layers*heads*seqlen*head_dim*2
bytes and the recorded sha256, and every fp16 value is finite (no Inf/NaN).
Exits 0 when all pass, 1 otherwise (2 for an unreadable header); prints one line per check.
"""

import argparse
import array
import hashlib
import json
import math
import sys
from pathlib import Path

DEFAULT_JSON = Path(__file__).resolve().parents[2] / "tests" / "data" / "minilm_qkv.json"

TOP_KEYS = {"format", "dtype", "layout", "tensors", "layers", "heads", "seqlen", "head_dim",
            "softmax_scale", "causal", "bin", "sha256", "provenance"}
PROVENANCE_KEYS = {"model", "package", "package_version", "text_title", "text_source",
                   "text_license", "tokens", "command", "generated", "validation"}
FIXED = {"format": "flashsteps-qkv-v1", "dtype": "float16", "layout": "LHND",
         "tensors": ["q", "k", "v"], "causal": False}


def check_metadata(meta):
    """Yield (name, ok, detail) for the JSON's keys and values."""
    yield "top-level keys", set(meta) == TOP_KEYS, sorted(set(meta) ^ TOP_KEYS)
    prov = meta.get("provenance", {})
    yield "provenance keys", set(prov) == PROVENANCE_KEYS, sorted(set(prov) ^ PROVENANCE_KEYS)
    for key, want in FIXED.items():
        yield f"{key} == {want!r}", meta.get(key) == want, meta.get(key)
    dims = [meta.get(k) for k in ("layers", "heads", "seqlen", "head_dim")]
    yield "dims are positive ints", all(isinstance(d, int) and d > 0 for d in dims), dims
    if isinstance(meta.get("head_dim"), int) and meta["head_dim"] > 0:
        want = 1.0 / math.sqrt(meta["head_dim"])
        got = meta.get("softmax_scale")
        yield "softmax_scale == 1/sqrt(head_dim)", got == want, got
    yield "provenance tokens == seqlen", prov.get("tokens") == meta.get("seqlen"), prov.get("tokens")


def count_nonfinite_fp16(blob):
    """Number of binary16 values (little-endian) whose exponent bits are all ones."""
    halves = array.array("H")
    halves.frombytes(blob)
    if sys.byteorder != "little":
        halves.byteswap()
    return sum(1 for h in halves if h & 0x7C00 == 0x7C00)


def check_bin(meta, json_path):
    """Yield (name, ok, detail) for the .bin's size, sha256 and finiteness."""
    bin_path = json_path.parent / meta["bin"]
    yield f"{bin_path.name} exists", bin_path.is_file(), str(bin_path)
    if not bin_path.is_file():
        return
    blob = bin_path.read_bytes()
    size = 3 * 2 * meta["layers"] * meta["heads"] * meta["seqlen"] * meta["head_dim"]
    yield f"size == {size} bytes", len(blob) == size, len(blob)
    digest = hashlib.sha256(blob).hexdigest()
    yield "sha256 matches", digest == meta["sha256"], digest
    bad = count_nonfinite_fp16(blob)
    yield "all values finite", bad == 0, f"{bad} Inf/NaN"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="?", type=Path, default=DEFAULT_JSON,
                        help="the fixture's header (default: %(default)s)")
    json_path = parser.parse_args(argv[1:]).json
    try:
        meta = json.loads(json_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        parser.error(f"json: cannot read {json_path}: {error}")
    if not isinstance(meta, dict):
        parser.error(f"json: {json_path} holds a {type(meta).__name__}, not an object")
    results = list(check_metadata(meta))
    if all(ok for _, ok, _ in results):
        results += list(check_bin(meta, json_path))
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    failed = sum(not ok for _, ok, _ in results)
    print(f"{json_path.name}: {len(results) - failed} checks ok, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
