# SPDX-License-Identifier: Apache-2.0
"""The table of each step's limits, read from the sources the build uses.

    python3 tools/book/step_limits.py --repo .        # prints the Markdown table

Per step (``steps/NN_slug/step.cu``):

- **dtypes**, **head dims**, **alignment**: its ``StepInfo info()`` (``accepts_fp32``,
  ``max_head_dim``, ``head_dim_multiple``, ``alignment_elems``; the defaults are the member
  initialisers of ``StepInfo`` in ``common/include/flashsteps/step.h``);
- **compiled head dims**: the ``dispatch_head_dim*`` the step calls, and the array that
  function dispatches over in ``common/include/flashsteps/dispatch.h`` (other head dims are
  padded up to the next compiled one);
- **benchmark cap**: ``bench_max_seqlen`` (the fourth value of the ``StepInfo{...}``);
- **GPUs**: the ``add_step(...)`` line of the root ``CMakeLists.txt``: its ISA set and
  ``REQUIRES`` (``CUDA_SM90A``: NVIDIA Hopper, sm_90a, only).

Masks are the same for every step: the contract (``attention.h``) has no mask, causal
aligned at the top left and at the bottom right, and every step implements all three.
Nothing is typed here per step: a new step's row appears when its files do.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_registry import STEP_NUMBER, step_order  # noqa: E402

FIELD_RE = re.compile(r"^\s*(?:std::int64_t|bool|int)\s+(\w+)\s*=\s*([^;]+);", re.M)
ADD_STEP_RE = re.compile(rf"^add_step\(({STEP_NUMBER})\s+(\w+)([^)]*)\)", re.M)
INFO_RE = re.compile(r"StepInfo\s+(?:info\(\)\s*\{\s*return\s*\{|i\{)([^}]*)\}")
ASSIGN_RE = re.compile(r"\bi\.(\w+)\s*=\s*([^,;]+)")
ARRAY_RE = re.compile(r"inline constexpr int (k\w*HeadDims)\[\]\s*=\s*\{([^}]*)\};")
DISPATCH_RE = re.compile(r"void (dispatch_head_dim\w*)\([^)]*\)\s*\{\s*detail::dispatch_head_dim_in<"
                         r"(k\w+)>")


def _value(text: str):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def defaults(repo: Path) -> dict:
    step_h = (repo / "common" / "include" / "flashsteps" / "step.h").read_text(encoding="utf-8")
    body = step_h[step_h.index("struct StepInfo"):]
    body = body[:body.index("};")]
    return {name: _value(v) for name, v in FIELD_RE.findall(body)}


def head_dim_sets(repo: Path) -> dict[str, list[int]]:
    """{dispatch function: compiled head dims}."""
    text = (repo / "common" / "include" / "flashsteps" / "dispatch.h").read_text(encoding="utf-8")
    arrays = {name: [int(x) for x in values.split(",")] for name, values in ARRAY_RE.findall(text)}
    return {fn: arrays[arr] for fn, arr in DISPATCH_RE.findall(text)}


def add_steps(repo: Path) -> dict[str, dict]:
    text = (repo / "CMakeLists.txt").read_text(encoding="utf-8")
    out = {}
    for num, slug, rest in ADD_STEP_RE.findall(text):
        words = rest.split()
        isa = words[words.index("ISA") + 1] if "ISA" in words else None
        req = []
        if "REQUIRES" in words:
            for w in words[words.index("REQUIRES") + 1:]:
                if w.isupper() and w not in ("ISA", "WERROR_PTXAS"):
                    req.append(w)
                else:
                    break
        out[num] = {"slug": slug, "isa": isa, "requires": req}
    return out


def architectures(repo: Path) -> dict[str, list[str]]:
    """{"cuda": default CUDA architectures without a GPU (cmake/FlashStepsGpu.cmake),
    "hip": the hip preset's (CMakePresets.json)}."""
    import json
    gpu = (repo / "cmake" / "FlashStepsGpu.cmake").read_text(encoding="utf-8")
    cuda = re.search(r'set\(CMAKE_CUDA_ARCHITECTURES "([^"]+)" CACHE STRING "[^"]*no local GPU',
                     gpu)
    presets = json.loads((repo / "CMakePresets.json").read_text(encoding="utf-8"))
    hip = next((p["cacheVariables"]["CMAKE_HIP_ARCHITECTURES"] for p in presets["configurePresets"]
                if "CMAKE_HIP_ARCHITECTURES" in p.get("cacheVariables", {})), "")
    return {"cuda": [f"sm_{a}" for a in (cuda[1].split(";") if cuda else [])],
            "hip": [a for a in hip.split(";") if a]}


def limits(repo: Path) -> list[dict]:
    base, sets, registered = defaults(repo), head_dim_sets(repo), add_steps(repo)
    rows = []
    folders = [*(repo / "steps").glob("[0-9][0-9]_*"), *(repo / "steps").glob("[0-9][0-9][a-z]_*")]
    for folder in sorted(folders, key=lambda f: step_order(f.name.partition("_")[0])):
        source = folder / "step.cu"
        if not source.is_file():
            continue
        text = source.read_text(encoding="utf-8")
        info_fn = text[text.index("StepInfo info()"):]
        info_fn = info_fn[:info_fn.index("\n}") if "\n}" in info_fn else len(info_fn)]
        m = INFO_RE.search(info_fn)
        if not m:
            raise ValueError(f"{source}: no StepInfo info() initialiser")
        fields = dict(base)
        init = [x.strip() for x in re.sub(r'"[^"]*"', '""', m[1]).split(",")]
        for name, value in zip(list(base), init[3:]):  # positional: StepInfo's fields in order
            fields[name] = _value(value)
        for name, value in ASSIGN_RE.findall(info_fn):
            fields[name] = _value(value)
        dispatch = sorted({d for d in re.findall(r"\b(dispatch_head_dim\w*)\(", text) if d in sets})
        compiled = sorted({x for d in dispatch for x in sets[d]})
        num = folder.name.partition("_")[0]
        reg = registered.get(num, {})
        rows.append({"number": num, "name": folder.name, **fields, "compiled": compiled,
                     "isa": reg.get("isa"), "requires": reg.get("requires", [])})
    return rows


def markdown(rows: list[dict], arch: dict[str, list[str]]) -> str:
    lines = ["<!-- generated by tools/book/step_limits.py from the steps' StepInfo, dispatch.h "
             "and CMakeLists.txt; do not edit -->",
             "| Step | dtypes | head_dim | compiled for D = | alignment | GPUs | benchmark N |",
             "|:--|:--|:--|:--|:--|:--|:--|"]
    for r in rows:
        dtypes = "fp16, bf16" + (", fp32" if r["accepts_fp32"] else "")
        mult = r["head_dim_multiple"]
        hd = f"1 to {r['max_head_dim']}" + (f", a multiple of {mult}" if mult > 1 else "")
        compiled = ", ".join(str(x) for x in r["compiled"]) or "any (not templated on D)"
        align = (f"{r['alignment_elems']} elements ({2 * r['alignment_elems']} bytes in 16 bits)"
                 if r["alignment_elems"] > 1 else "none")
        if "CUDA_SM90A" in r["requires"]:
            gpus = "NVIDIA Hopper (sm_90a) only"
        else:
            gpus = (f"NVIDIA ({', '.join(arch['cuda'])} by default) and AMD "
                    f"({', '.join(arch['hip'])}, compiled, not measured)")
        if r["isa"]:
            gpus += f"; ISA check `{r['isa']}`"
        cap = f"up to {r['bench_max_seqlen']}" if r["bench_max_seqlen"] else "every N"
        lines.append(f"| [{r['number']}](steps/{r['name']}.md) | {dtypes} | {hd} | {compiled} | "
                     f"{align} | {gpus} | {cap} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    args = ap.parse_args(argv)
    print(markdown(limits(args.repo), architectures(args.repo)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
