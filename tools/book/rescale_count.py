#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Count, on the CPU, how often step 04's warps rescale their O accumulator.

    python3 tools/book/rescale_count.py            # prints the counts facts.py gives the book

Step 04 multiplies O by alpha only when the running maximum of some row of the warp grew at
this KV tile (one ``tile::warp_any`` vote over the warp's WARP_M rows). This script counts
the tiles where that vote is "yes", without a GPU, in three ways:

- **i.i.d. scores, exact**: if the scores are independent and identically distributed
  (continuous), a row's maximum grows at tile t (t = 1, 2, ...) with probability 1/t
  whatever the distribution, independently across rows, so a warp of R rows rescales at
  tile t with probability 1 - (1 - 1/t)^R. The expected count over tiles 2..T is the sum.
- **random Q and K like the benchmark**: Q, K ~ N(0, 1) (the harness's inputs,
  common/include/flashsteps/problem.h), S = Q K^T in float64, the step's WARP_M rows and
  BLOCK_N keys per tile, N keys; every warp's vote at every tile is counted. Rows of one
  head share the keys, so their maxima are not independent: this is the count a run of the
  benchmark problem would see.
- **real activations**: the MiniLM fixture (tests/data/minilm_qkv.bin, 6 layers x 12 heads,
  128 tokens, D = 32), S = Q K^T in float64, with 64-key tiles (step 04 itself uses one
  128-key tile at D = 32, so with 128 tokens it never rescales after the first tile).

The vote at the first tile is always "yes" (the running max starts at -inf) and is not
counted. A step's kernel rounds Q and K to 16 bits and S to float32; a tie or a growth
below float32's resolution could change a vote, which the float64 count ignores.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "minilm_qkv.json"

# Step 04's NVIDIA tile at D = 64 and 128 (steps/04_tensor_cores/step.cu, DefaultTile):
# 4 warps of WARP_M = 32 rows, BLOCK_N = 64 keys per tile.
WARP_M = 32
BLOCK_N = 64
SEQLEN = 4096
HEAD_DIM = 128
SEED = 20261130


def expected_iid(tiles: int, rows: int = WARP_M) -> float:
    """Expected number of tiles 2..``tiles`` at which some of ``rows`` i.i.d. rows' maximum
    grows: sum over t of 1 - (1 - 1/t)^rows."""
    return sum(1.0 - (1.0 - 1.0 / t) ** rows for t in range(2, tiles + 1))


def votes(scores: np.ndarray, warp_m: int = WARP_M, block_n: int = BLOCK_N) -> np.ndarray:
    """Per warp and tile after the first: True where the running max of some row of the warp
    grew. ``scores``: [rows, keys] (rows a multiple of warp_m, keys of block_n)."""
    rows, keys = scores.shape
    tile_max = scores.reshape(rows, keys // block_n, block_n).max(axis=2)   # [rows, tiles]
    running = np.maximum.accumulate(tile_max, axis=1)
    grew = running[:, 1:] > running[:, :-1]                                  # [rows, tiles-1]
    return grew.reshape(rows // warp_m, warp_m, -1).any(axis=1)             # [warps, tiles-1]


@dataclass
class Count:
    warps: int          # warps counted
    tiles: int          # tiles per row (the first one included)
    rescaled: int       # (warp, tile) votes "yes" after the first tile
    votes: int          # (warp, tile) votes after the first tile

    @property
    def per_warp(self) -> float:
        return self.rescaled / self.warps

    @property
    def share(self) -> float:
        return self.rescaled / self.votes

    def last_tile_share(self, v: np.ndarray) -> float:
        return float(v[:, -1].mean())


def count_random(seqlen: int = SEQLEN, head_dim: int = HEAD_DIM, heads: int = 8,
                 warps_per_head: int = 32, seed: int = SEED) -> tuple[Count, float]:
    """Q, K ~ N(0, 1); per head one K of ``seqlen`` keys and ``warps_per_head`` warps of
    WARP_M query rows. Returns the count and the share of warps that rescale at the last
    tile."""
    rng = np.random.default_rng(seed)
    all_votes = []
    for _ in range(heads):
        k = rng.standard_normal((seqlen, head_dim))
        q = rng.standard_normal((warps_per_head * WARP_M, head_dim))
        all_votes.append(votes(q @ k.T))
    v = np.concatenate(all_votes)
    c = Count(v.shape[0], v.shape[1] + 1, int(v.sum()), v.size)
    return c, c.last_tile_share(v)


def load_fixture(meta_path: Path = FIXTURE) -> tuple[np.ndarray, np.ndarray, dict]:
    """Q and K of the fixture as float64 [layers, heads, tokens, head_dim]."""
    meta = json.loads(meta_path.read_text())
    shape = (meta["layers"], meta["heads"], meta["seqlen"], meta["head_dim"])
    data = np.fromfile(meta_path.parent / meta["bin"], dtype=np.float16)
    size = int(np.prod(shape))
    tensors = {name: data[i * size:(i + 1) * size].reshape(shape).astype(np.float64)
               for i, name in enumerate(meta["tensors"])}
    return tensors["q"], tensors["k"], meta


def count_fixture(block_n: int = BLOCK_N) -> tuple[Count, dict]:
    q, k, meta = load_fixture()
    vs = [votes(q[layer, h] @ k[layer, h].T, WARP_M, block_n)
          for layer in range(q.shape[0]) for h in range(q.shape[1])]
    v = np.concatenate(vs)
    return Count(v.shape[0], v.shape[1] + 1, int(v.sum()), v.size), meta


@functools.lru_cache(maxsize=1)
def summary() -> dict:
    """The numbers the book prints (tools/book/facts.py), formatted."""
    tiles = SEQLEN // BLOCK_N
    exp = expected_iid(tiles)
    rnd, rnd_last = count_random()
    fix, meta = count_fixture()
    last_iid = 1.0 - (1.0 - 1.0 / tiles) ** WARP_M
    return {
        "seqlen": SEQLEN, "block_n": BLOCK_N, "warp_m": WARP_M, "head_dim": HEAD_DIM,
        "tiles": tiles, "after_first": tiles - 1,
        "iid": {"expected": f"{exp:.1f}", "pct": f"{100 * exp / (tiles - 1):.0f}",
                "saved_pct": f"{100 - 100 * exp / (tiles - 1):.0f}",
                "last_pct": f"{100 * last_iid:.0f}"},
        "random": {"warps": rnd.warps, "rescaled": f"{rnd.rescaled:,}", "votes": f"{rnd.votes:,}",
                   "per_warp": f"{rnd.per_warp:.1f}", "pct": f"{100 * rnd.share:.0f}",
                   "last_pct": f"{100 * rnd_last:.0f}"},
        "fixture": {"model": meta["provenance"]["model"], "tokens": meta["seqlen"],
                    "head_dim": meta["head_dim"], "warps": fix.warps,
                    "tiles": fix.tiles, "rescaled": fix.rescaled, "votes": fix.votes,
                    "pct": f"{100 * fix.share:.0f}"},
    }


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no options; --help
    print(json.dumps(summary(), indent=1))
