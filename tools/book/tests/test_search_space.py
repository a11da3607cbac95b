# SPDX-License-Identifier: Apache-2.0
"""Tests of step 06's search-space figure (tools/book/plot_search_space.py), of what
stage_book.py makes of the tuning tables, and of the facts of the tensor-core chapters
(facts.py: SDPA, GEMM ceiling, causal target, tuning), on synthetic data.

    python3 -m pytest tools/book/tests -q

Every number here is made up; none is a measurement.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

BOOK_TOOLS = Path(__file__).resolve().parents[1]
REPO = BOOK_TOOLS.parents[1]
sys.path[:0] = [str(BOOK_TOOLS), str(REPO / "tools" / "results"),
                str(REPO / "tools" / "results" / "tests")]

import facts  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import plot_search_space as pss  # noqa: E402
import rendered  # noqa: E402
import stage_book  # noqa: E402
import synth  # noqa: E402

HAS_MPL = importlib.util.find_spec("matplotlib") is not None
CONFIGS = {64: ["m64_n64_w4_s2", "m128_n64_w4_s2", "m128_n64_w4_s3"],
           128: ["m64_n32_w4_s2", "m128_n32_w8_s2", "m128_n64_w4_s2"]}


def flops(n: int, d: int, causal: bool) -> int:
    pairs = n * (n + 1) // 2 if causal else n * n
    return 4 * (16384 // n) * (2048 // d) * d * pairs


def synthetic_table(extra: list[dict] | None = None) -> dict:
    """bf16 entries for D = 64 and 128, both masks, N = 1024 and 4096: configuration k of a
    head dim runs at 100 * (k + 1) TFLOPS, so the last one is the fastest and the choice."""
    entries = []
    for d, configs in CONFIGS.items():
        for causal in (False, True):
            for n in (1024, 4096):
                ms = {c: flops(n, d, causal) / (100e12 * (k + 1)) * 1e3
                      for k, c in enumerate(configs)}
                entries.append({"device": "Test GPU (synthetic)", "dtype": "bf16", "head_dim": d,
                                "causal": causal, "seqlen_bucket": n, "choice": configs[-1],
                                "median_ms": ms})
    return {"format": pss.FORMAT,
            "meta": {"command": "tune_step06 --out test.json", "date": "2000-01-01T00:00:00Z",
                     "git_commit": "0000000synthetic"},
            "entries": entries + (extra or [])}


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# --- the table and the FLOP rule ------------------------------------------------------------

def test_flops_follow_the_course_rule_and_ms_become_tflops(tmp_path):
    table = pss.load_table(write(tmp_path / "t.json", synthetic_table()))
    assert len(table.entries) == 8 and table.devices == ["Test GPU (synthetic)"]
    full = pss.Shape("bf16", 128, False, 4096)
    causal = pss.Shape("bf16", 128, True, 4096)
    assert (full.batch, full.heads) == (4, 16)
    assert full.flops == 4 * 4 * 16 * 128 * 4096 * 4096
    assert causal.flops == 4 * 4 * 16 * 128 * (4096 * 4097 // 2)
    for e in table.entries:
        for k, c in enumerate(CONFIGS[e.shape.head_dim]):
            assert e.tflops(c) == pytest.approx(100.0 * (k + 1))
        assert e.spread == pytest.approx(3.0)


def test_choices_table(tmp_path):
    table = pss.load_table(write(tmp_path / "t.json", synthetic_table()))
    text = pss.choices_markdown(table, "bf16")
    assert "| D, mask | N = 1024 | N = 4096 |" in text
    assert "| 128, causal | `m128_n64_w4_s2` 300 (×3.00) | `m128_n64_w4_s2` 300 (×3.00) |" in text
    assert "holds no fp16 entry" in pss.choices_markdown(table, "fp16")
    # an entry outside the standard set (Hq * D = 2048 needs D | 2048) is counted, not drawn
    odd = {"device": "Test GPU (synthetic)", "dtype": "bf16", "head_dim": 96, "causal": False,
           "seqlen_bucket": 1024, "choice": "m64_n32_w4_s2", "median_ms": {"m64_n32_w4_s2": 1.0}}
    table = pss.load_table(write(tmp_path / "u.json", synthetic_table([odd])))
    assert len(table.standard("bf16")) == 8
    assert "1 entries of the table are not standard-set shapes" in pss.choices_markdown(table, "bf16")


@pytest.mark.parametrize("change, where", [
    (lambda t: t.update(format="other/1"), "format"),
    (lambda t: t["entries"][0].update(choice="m1_n2"), "choice"),
    (lambda t: t["entries"][0].update(choice="m999_n64_w4_s2"), "has no time"),
    (lambda t: t["entries"][0]["median_ms"].update(m64_n64_w4_s2=-1.0), "positive time"),
    (lambda t: t["entries"][0].update(dtype="fp32"), "dtype"),
    (lambda t: t["entries"][0].update(causal=1), "causal"),
    (lambda t: t["entries"][0].pop("seqlen_bucket"), "seqlen_bucket"),
])
def test_malformed_tables_name_the_field(tmp_path, change, where):
    data = synthetic_table()
    change(data)
    with pytest.raises(pss.TableError, match=where):
        pss.load_table(write(tmp_path / "bad.json", data))


def test_no_folder_no_tables(tmp_path):
    assert pss.load_tables(tmp_path / "none") == []


@pytest.mark.skipif(not HAS_MPL, reason="needs matplotlib")
def test_plot_is_written_and_deterministic(tmp_path):
    path = write(tmp_path / "t.json", synthetic_table())
    assert pss.main([str(path), "-o", str(tmp_path / "a"), "--markdown",
                     str(tmp_path / "a.md")]) == 0
    assert pss.main([str(path), "-o", str(tmp_path / "b"), "--seqlen", "1024", "4096"]) == 0
    for ext in (".svg", ".png"):
        assert (tmp_path / f"a{ext}").read_bytes() == (tmp_path / f"b{ext}").read_bytes()
    svg = (tmp_path / "a.svg").read_text()
    assert "m128_n64_w4_s3" in svg and "the tuner's choice" in svg and "head_dim 128, causal" in svg
    assert "TFLOPS / fastest at this N" in svg             # a heatmap, not 21 coloured bars
    assert "`m128_n64_w4_s3` 300" in (tmp_path / "a.md").read_text()
    bad = write(tmp_path / "bad.json", {"format": "x"})
    assert pss.main([str(bad), "-o", str(tmp_path / "c")]) == 2


# --- stage_book ------------------------------------------------------------------------------

def fake_repo(tmp_path: Path, table: dict | None) -> Path:
    repo = tmp_path / "repo"
    (repo / "steps" / "06_autotuned").mkdir(parents=True)
    (repo / "steps" / "06_autotuned" / "step.cu").write_text("// step 06\n")
    (repo / "tools" / "book").mkdir(parents=True)
    (repo / "tools" / "book" / "plot_search_space.py").symlink_to(BOOK_TOOLS / "plot_search_space.py")
    (repo / "tools" / "results").mkdir(parents=True)
    for name in ("plot_results.py", "flashsteps_results.py"):
        (repo / "tools" / "results" / name).symlink_to(REPO / "tools" / "results" / name)
    (repo / "steps" / "06_autotuned" / "tuned").mkdir()
    (repo / "steps" / "06_autotuned" / "tuned" / "README.md").write_text("no table yet\n")
    if table is not None:
        write(repo / "steps" / "06_autotuned" / "tuned" / "test-gpu.json", table)
    return repo


def test_stage_without_a_table_says_not_measured(tmp_path):
    repo = fake_repo(tmp_path, None)
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_search_space(repo, gen, keep)
    text = (gen / "steps" / "06_autotuned" / "search_space.md").read_text()
    assert "Not measured yet" in text and "{figure}" not in text
    assert "`steps/06_autotuned/tuned/<gpu>.json`" in text
    assert keep == {gen / "steps" / "06_autotuned" / "search_space.md"}


def test_stage_finds_the_tuning_tables_of_any_step(tmp_path):
    """No step is named: a later step with its own tuned/ folder gets its search space, and
    a step without one gets none."""
    repo = fake_repo(tmp_path, None)
    (repo / "steps" / "07_later" / "tuned").mkdir(parents=True)
    (repo / "steps" / "07_later" / "step.cu").write_text("// step 07\n")
    (repo / "steps" / "08_plain").mkdir()
    (repo / "steps" / "08_plain" / "step.cu").write_text("// step 08\n")
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_search_space(repo, gen, keep)
    assert "`steps/07_later/tuned/<gpu>.json`" in \
        (gen / "steps" / "07_later" / "search_space.md").read_text()
    assert not (gen / "steps" / "08_plain").exists()


@pytest.mark.skipif(not HAS_MPL, reason="needs matplotlib")
def test_stage_draws_every_table(tmp_path):
    repo = fake_repo(tmp_path, synthetic_table())
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_search_space(repo, gen, keep)
    out = gen / "steps" / "06_autotuned"
    text = (out / "search_space.md").read_text()
    assert "/_generated/steps/06_autotuned/search_space_test-gpu.svg" in text
    assert "N = 1024, 4096" in text and "`m128_n64_w4_s3` 300 (×3.00)" in text
    assert (out / "search_space_test-gpu.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    assert {out / "search_space_test-gpu.svg", out / "search_space_test-gpu.png"} <= keep


def test_stage_fails_loudly_on_a_malformed_table(tmp_path):
    repo = fake_repo(tmp_path, {"format": "flashsteps-step06-tuning/1", "entries": [{}]})
    with pytest.raises(stage_book.StageError, match="tuning table"):
        stage_book.generate_search_space(repo, tmp_path / "gen", set())


# --- facts -----------------------------------------------------------------------------------

def attention_entries(n_values=(4096, 8192), scale: float = 1.0):
    out = []
    for d in (64, 128):
        for n in n_values:
            for mask in ("full", "causal"):
                out.append((f"attention/bf16/hd{d}/n{n}/{mask}", scale * (100.0 if mask == "full"
                                                                          else 50.0), n, d))
    return out


def tensor_core_tree(root: Path) -> list[fr.Record]:
    """Steps 04 and 05 and the SDPA flash baseline: step 05 = step 04 full, twice its causal
    TFLOPS; SDPA at 125 TFLOPS full and 62.5 causal, so step 04 is 0.8 of it everywhere."""
    gpu = root / synth.GPU
    gpu.mkdir(parents=True)
    files = {"step04": synth.bench_json("04", attention_entries()),
             "step05": synth.bench_json("05", [(n, t * (2 if n.endswith("causal") else 1), s, d)
                                               for n, t, s, d in attention_entries()]),
             "sdpa-flash": synth.bench_json("sdpa-flash", attention_entries(scale=1.25))}
    files["sdpa-flash"]["context"]["flashsteps_step_name"] = "PyTorch SDPA flash"
    for name, data in files.items():
        (gpu / f"{name}.json").write_text(json.dumps(data))
    return fr.load_results(root)


def test_sdpa_and_causal_facts(tmp_path):
    records = tensor_core_tree(tmp_path / "r")
    f = rendered.prose(rendered.values(records))
    assert "step 04 runs `attention/bf16/hd128/n4096/full` at 100 TFLOPS, 0.80 times PyTorch " \
           "SDPA flash (125 TFLOPS)" in f
    assert "over the 8 attention benchmarks that both ran (bf16, D = 64 and 128, N = 4096 to " \
           "8192, with and without the causal mask)" in f
    assert "from 0.80 to 0.80 times PyTorch SDPA flash's without a mask (4 benchmarks, " \
           "geometric mean 0.80) and from 0.80 to 0.80 times PyTorch SDPA flash's with the " \
           "causal mask" in f
    assert "the course's target for step 04, at least 0.8 times PyTorch SDPA flash at every " \
           "benchmark, is met: step 04 reaches it at all 8 attention benchmarks" \
           in f
    assert "Without a mask the target is reached at 4 of 4" in f
    assert "not measured yet" in f
    assert "at least 1.0 times" in f
    # step 05's causal benchmarks run at twice step 04's TFLOPS: the target of 1.8 is met
    assert "at N = 8192, step 05 runs causal attention this many times as fast as step 04: " \
           "2.00 at bf16, D = 64 (100 against 50.0 TFLOPS) and 2.00 at bf16, D = 128" \
           in f
    assert "all 2 meet the course's target of at least 1.8" in f
    assert "from 2.00 to 2.00" in f
    assert "Across the 4 bf16 unmasked attention benchmarks that steps 04 and 05 both ran on " \
           "the NVIDIA Test GPU (synthetic), the speed-up of step 05 ranges from 1.00 to 1.00" in f
    assert "GEMM ceiling of that GPU is not measured yet" in f
    assert "not measured yet" in f
    assert "not measured yet" in f


def test_sdpa_target_is_judged_per_benchmark(tmp_path):
    """A geometric mean above the target does not meet it when one point is below it."""
    gpu = tmp_path / "r" / synth.GPU
    gpu.mkdir(parents=True)
    mine = [(n, t * (0.9 if "hd64/n4096/causal" in n else 1.2), s, d)
            for n, t, s, d in attention_entries()]
    fp16 = [(n.replace("bf16", "fp16"), t, s, d) for n, t, s, d in mine]
    base = attention_entries()
    base += [(n.replace("bf16", "fp16"), t, s, d) for n, t, s, d in base]
    (gpu / "step06.json").write_text(json.dumps(synth.bench_json("06", mine + fp16)))
    data = synth.bench_json("sdpa-flash", base)
    data["context"]["flashsteps_step_name"] = "PyTorch SDPA flash"
    (gpu / "sdpa-flash.json").write_text(json.dumps(data))
    text = rendered.prose(rendered.values(fr.load_results(tmp_path / "r")))
    assert "is missed: step 06 reaches it at 14 of the 16 attention benchmarks that both ran " \
           "(fp16 and bf16, D = 64 and 128" in text
    assert "The ratio runs from 0.90 (`attention/bf16/hd64/n4096/causal`) to 1.20" in text
    assert "; with the causal mask the target is reached at 6 of 8 (0.90 to 1.20" in text
    assert "Without a mask the target is reached at 8 of 8" in text


def test_causal_target_can_fall_short(tmp_path):
    root = tmp_path / "r"
    (root / synth.GPU).mkdir(parents=True)
    for step, scale in (("04", 1.0), ("05", 1.5)):
        data = synth.bench_json(step, attention_entries(scale=scale))
        (root / synth.GPU / f"step{step}.json").write_text(json.dumps(data))
    text = rendered.prose(rendered.values(fr.load_results(root)))
    assert "1.50 at bf16, D = 64" in text
    assert "the course's target of at least 1.8 is missed at 2 of the 2 (lowest 1.50)" in text


def test_timing_batches_fact(tmp_path):
    root = tmp_path / "r"
    (root / synth.GPU).mkdir(parents=True)
    for step in ("03", "04"):
        data = synth.bench_json(step, attention_entries())
        if step == "04":
            for i, b in enumerate(data["benchmarks"]):
                b["calls_per_timing"] = 1 + i % 3
        (root / synth.GPU / f"step{step}.json").write_text(json.dumps(data))
    text = rendered.prose(rendered.values(fr.load_results(root)))
    assert "the results of step 03 were timed one call per event pair" in text
    assert "those of step 04 in batches, 1 to 3 calls per event pair" in text


def test_timing_batches_fact_when_every_step_is_batched(tmp_path):
    root = tmp_path / "r"
    (root / synth.GPU).mkdir(parents=True)
    data = synth.bench_json("04", attention_entries())
    for i, b in enumerate(data["benchmarks"]):
        b["calls_per_timing"] = 1 + i % 3
    (root / synth.GPU / "step04.json").write_text(json.dumps(data))
    text = rendered.prose(rendered.values(fr.load_results(root)))
    assert "the results of step 04 in batches, 1 to 3 calls per event pair" in text
    assert "one call per event pair" not in text


def test_gemm_and_ceiling_facts(tmp_path):
    root = synth.make_tree(tmp_path / "r")
    (root / synth.GPU / "step04.json").write_text(json.dumps(synth.bench_json(
        "04", [(synth.HEADLINE, 250.0, synth.N, synth.D)])))
    records, ceilings = fr.load_results(root), fr.load_ceilings(root)
    f = rendered.prose(rendered.values(records, ceilings))
    assert "step 04 runs `attention/bf16/hd128/n4096/full` at 250 TFLOPS: 50 % of the dense " \
           "bf16 GEMM rate measured on the same GPU (500 TFLOP/s)" in f
    assert "the measured dense bf16 GEMM rate (500 TFLOP/s) is 10.0 times the measured fp32 " \
           "FMA rate (50 TFLOP/s)" in f
    assert "The tensor-core and fp32 FMA ceilings are not measured yet on the same GPU." in \
        rendered.prose(rendered.values())


def test_tuning_fact(tmp_path):
    table = pss.load_table(write(tmp_path / "test-gpu.json", synthetic_table()))
    text = rendered.prose(rendered.values(tuning={"06": [table]}))
    assert "`steps/06_autotuned/tuned/test-gpu.json`, tuned on 2000-01-01, commit " \
           "`0000000synth`) holds 8 keys (bf16; head dims 64, 128)" in text
    assert "(3 at D = 64 and 3 at D = 128)" in text
    assert "use 2 of the 5 configurations it timed" in text
    assert "from 3.00 to 3.00 times as fast as the slowest" in text
    assert "The choice is the heuristic shape" not in text      # not an NVIDIA table


def test_tuning_fact_compares_with_the_heuristic(tmp_path):
    """An NVIDIA table: the heuristic (m128_n64_w4_s2 at D = 64 and 128) is the fastest,
    hence the choice, at D = 128; at D = 64 an overlapped shape beats it by 1.5x."""
    data = synthetic_table()
    for e in data["entries"]:
        e["device"] = "NVIDIA Test GPU"
        if e["head_dim"] == 64:
            e["median_ms"]["m128_n64_w4_s3_ov"] = e["median_ms"].pop("m128_n64_w4_s3")
            e["median_ms"]["m128_n64_w4_s2"] = 1.5 * e["median_ms"]["m128_n64_w4_s3_ov"]
            e["choice"] = "m128_n64_w4_s3_ov"
        else:
            e["median_ms"]["m128_n64_w4_s2"] = 0.5 * min(e["median_ms"].values())
            e["choice"] = "m128_n64_w4_s2"
    table = pss.load_table(write(tmp_path / "nvidia-test.json", data))
    text = rendered.prose(rendered.values(tuning={"06": [table]}))
    assert "The choice is the heuristic shape (step 05's) at 4 of the 8 " \
           "keys (0 of 4 at D = 64 and 4 of 4 at D = 128); where the tuner chose another " \
           "shape, it timed it 1.50 to 1.50 times as fast as the heuristic's" in text
    assert "An overlapped configuration (`_ov`) is the choice at 4 of the 8 keys." in text


def test_heuristic_matches_step06_source():
    """facts.HEURISTIC_NVIDIA is heuristic()'s NVIDIA branch in steps/06_autotuned/step.cu."""
    source = (REPO / "steps" / "06_autotuned" / "step.cu").read_text()
    body = source[source.index("TileChoice heuristic(int head_dim"):]
    nvidia = body[body.index("#else"):body.index("#endif")]
    shapes = re.findall(r"TileChoice\{(\d+), (\d+), (\d+), (\d+)\}", nvidia)
    bounds = [int(x) for x in re.findall(r"head_dim <= (\d+)", nvidia)]
    assert len(shapes) == len(bounds) + 1
    for d, name in facts.HEURISTIC_NVIDIA["06"].items():
        k = next((i for i, b in enumerate(bounds) if d <= b), len(bounds))
        assert name == "m{}_n{}_w{}_s{}".format(*shapes[k]), d


def test_overlapped_configurations_parse_and_sort():
    assert pss.CHOICE_RE.match("m128_n32_w4_s3_ov") and not pss.CHOICE_RE.match("m128_n32_w4_s3_o")
    assert pss.overlapped("m128_n32_w4_s3_ov") and not pss.overlapped("m128_n32_w4_s3")
    names = ["m128_n32_w4_s3_ov", "m64_n32_w4_s2", "m128_n32_w4_s3", "m128_n32_w4_s2"]
    assert sorted(names, key=pss.config_key) == ["m64_n32_w4_s2", "m128_n32_w4_s2",
                                                  "m128_n32_w4_s3", "m128_n32_w4_s3_ov"]


def test_step_tables_from_step_04_on_show_the_baselines(tmp_path):
    tensor_core_tree(tmp_path / "r")
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_step_results(REPO, gen, tmp_path / "r", keep)
    five = (gen / "steps" / "05_causal" / "results.md").read_text()
    assert "*PyTorch SDPA flash* (TFLOPS" in five and "62.5 (160%)" in five
    widths = {line.count("|") - 1 for line in five.splitlines() if line.startswith("|")}
    assert max(widths) <= 5                      # split: no 17-column table
    three = (gen / "steps" / "03_online_softmax" / "results.md").read_text()
    assert "PyTorch SDPA" not in three


def test_fa2_shapes_against_step05():
    """FlashAttention-2's launch template (facts.FA2_SHAPES) agrees with step 05's shapes at
    D = 32, 96 and 128 only; the chapters say which differ, from the data, not by hand."""
    f = facts.fa2_shapes(facts.HEURISTIC_NVIDIA["06"])
    assert [r["d"] for r in f["same"]] == [32, 96, 128]
    assert [(r["d"], r["fa2"], r["ours"]) for r in f["differ"]] == [
        (64, "128 × 128 × 4", "128 × 64 × 4"), (256, "64 × 64 × 4", "128 × 32 × 8")]
    text = rendered.prose(rendered.values())
    assert "128 × 128 × 4 at $D = 64$ where step 04 runs 128 × 64 × 4" in text
    assert "at $D = 256$ FlashAttention-2 runs 64 × 64 × 4 on Hopper (128 × 64 × 8 on an " \
           "A100), step 05 128 × 32 × 8" in text
    assert "heuristic shape (FlashAttention-2's" not in text


def test_step_defaults_match_the_heuristic():
    """Step 04's and step 05's DefaultTile on NVIDIA are facts.HEURISTIC_NVIDIA (the shapes
    the chapters compare with FlashAttention-2's)."""
    for step in ("04_tensor_cores", "05_causal"):
        source = (REPO / "steps" / step / "step.cu").read_text()
        nvidia = source[source.index("#else", source.index("struct DefaultTile")):]
        nvidia = nvidia[:nvidia.index("#endif")]
        generic = re.search(r"struct DefaultTile \{ using type = TileConfig<(\d+), (\d+), (\d+), "
                            r"(\d+)>", nvidia)
        special = dict((int(d), "m{}_n{}_w{}_s{}".format(*rest)) for d, *rest in re.findall(
            r"DefaultTile<(\d+)> \{ using type = TileConfig<(\d+), (\d+), (\d+), (\d+)>", nvidia))
        for d, name in facts.HEURISTIC_NVIDIA["06"].items():
            assert special.get(d, "m{}_n{}_w{}_s{}".format(*generic.groups())) == name, (step, d)


def test_tuning_counts_fa2_shape(tmp_path):
    """The tuning fact counts the keys whose choice is FlashAttention-2's shape."""
    data = synthetic_table()
    for e in data["entries"]:
        e["device"] = "NVIDIA Test GPU"
        if e["head_dim"] == 64:
            e["median_ms"]["m128_n128_w4_s2"] = 0.5 * min(e["median_ms"].values())
            e["choice"] = "m128_n128_w4_s2"
    table = pss.load_table(write(tmp_path / "nvidia-test.json", data))
    text = rendered.prose(rendered.values(tuning={"06": [table]}))
    assert "At D = 64 the tuner chose FlashAttention-2's shape, 128 × 128 × 4, at 4 of the 4 " \
           "keys: a shape that step 05 does not run at this head dim" in text


def test_step09_table_is_read_and_drawn(tmp_path):
    """Step 09's format and names (mBLOCK_M_nBLOCK_N_sSTAGES) parse, sort by their
    parameters, and name the step in the figure; a step 06 name in it is refused."""
    entry = {"device": "NVIDIA H100 80GB HBM3", "dtype": "bf16", "head_dim": 128, "causal": True,
             "seqlen_bucket": 8192, "choice": "m128_n160_s2",
             "median_ms": {"m128_n176_s2": 0.84, "m128_n160_s2": 0.83, "m128_n128_s2": 0.85}}
    data = {"format": "flashsteps-step09-tuning/1", "meta": {}, "entries": [entry]}
    table = pss.parse_table(data, "nine.json")
    assert table.step == "09"
    assert sorted(table.entries[0].median_ms, key=pss.config_key) == \
        ["m128_n128_s2", "m128_n160_s2", "m128_n176_s2"]
    written = pss.plot(table, tmp_path / "nine", "bf16")
    svg = next(p for p in written if p.suffix == ".svg").read_text(encoding="utf-8")
    assert "Step 09 search space on NVIDIA H100 80GB HBM3" in svg
    assert "mBLOCK_M_nBLOCK_N_sSTAGES" in svg
    bad = {**data, "entries": [{**entry, "choice": "m128_n64_w4_s2"}]}
    with pytest.raises(pss.TableError, match=r"choice: not of the form mBLOCK_M_nBLOCK_N_sSTAGES"):
        pss.parse_table(bad, "nine.json")
