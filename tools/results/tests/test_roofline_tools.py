"""Tests of the ceilings and Nsight Compute loaders, the roofline tool and the per-step
results table, on synthetic trees (tools/results/tests/synth.py) and the fixtures in data/."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402
import results_table  # noqa: E402
import synth  # noqa: E402

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="needs matplotlib")


def run_tool(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOLS / script), *map(str, args)],
                          capture_output=True, text=True, check=False)


# --- ceilings ------------------------------------------------------------------------------

def test_load_results_skips_the_ceiling_files(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    recs = fr.load_results(root)
    assert {Path(r.source).name for r in recs} == {"step01.json", "step02.json", "step03.json"}


def test_load_ceilings_fields(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    ceilings = fr.load_ceilings(root)
    assert [(c.gpu, c.kind, c.value, c.unit) for c in ceilings] == [
        ("test-gpu", "bandwidth", 1000.0, "GB/s"), ("test-gpu", "fp32_fma", 50.0, "TFLOP/s"),
        ("test-gpu", "bf16_gemm", 500.0, "TFLOP/s")]
    assert ceilings[1].method == "synthetic FMA chains" and ceilings[1].gpu_name == synth.GPU_NAME
    assert ceilings[0].extra["sm_count"] == 8 and ceilings[2].extra["torch_version"] == "0.0"
    assert fr.load_ceilings(tmp_path / "results" / "test-gpu" / "ncu") == []  # none there


@pytest.mark.parametrize("key, value, where", [
    ("copy_gbps", -1.0, "copy_gbps"), ("copy_gbps", "fast", "copy_gbps"),
    ("fp32_fma_method", "", "fp32_fma_method"), ("gpu_name", None, "gpu_name"),
])
def test_malformed_ceilings_name_file_and_field(tmp_path, key, value, where):
    root = synth.make_tree(tmp_path / "results")
    path = root / "test-gpu" / "ceilings.json"
    doc = json.loads(path.read_text())
    doc[key] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(fr.ResultsError) as exc:
        fr.load_ceilings(root)
    assert str(path) in str(exc.value) and where in str(exc.value)


# --- Nsight Compute ------------------------------------------------------------------------

def test_load_ncu_parses_units_separators_and_launches(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    kernels = fr.load_ncu(root)
    assert [(k.step, k.launch, k.name) for k in kernels] == [
        ("01", 0, "s_kernel"), ("01", 1, "softmax_kernel"), ("01", 2, "pv_kernel"),
        ("02", 0, "attention_kernel"), ("03", 0, "attention_kernel")]
    k = kernels[3]
    assert k.gpu == "test-gpu" and k.grid == (512, 1, 1) and k.blocks == 512
    assert k.threads_per_block == 128
    assert k.metrics["dram__bytes_read.sum"] == 1.5e7          # "15,000,000" byte
    assert k.units["lts__t_sectors_srcunit_tex_op_read.sum"] == "sector"


def test_load_ncu_scales_units_and_rejects_bad_rows(tmp_path):
    path = tmp_path / "g" / "ncu" / "step05.csv"
    path.parent.mkdir(parents=True)
    path.write_text(synth.ncu_csv([("k", (1, 1, 1), (32, 1, 1), {
        "dram__bytes_read.sum": ("Mbyte", 1.5), "gpu__time_duration.sum": ("usecond", 2)})]))
    (k,) = fr.load_ncu(tmp_path)
    assert k.step == "05" and k.metrics == {"dram__bytes_read.sum": 1.5e6,
                                            "gpu__time_duration.sum": 2000.0}
    path.write_text(path.read_text().replace('"Mbyte"', '"furlong"'))
    with pytest.raises(fr.ResultsError, match="unknown unit 'furlong'"):
        fr.load_ncu(tmp_path)
    path.write_text("no header here\n")
    with pytest.raises(fr.ResultsError, match="header"):
        fr.load_ncu(tmp_path)


def test_short_kernel_names():
    assert fr.short_kernel_name("void (anonymous namespace)::pv_kernel<float>(Params<float>)") \
        == "pv_kernel"
    assert fr.short_kernel_name("attention_kernel") == "attention_kernel"


# --- roofline ------------------------------------------------------------------------------

def test_roofline_points(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    points = pr.roofline_points(fr.load_results(root), fr.load_ncu(root))
    assert [p.step for p in points] == ["01", "02", "03"]
    p1, p2, _ = points
    assert p1.problem.flops == synth.FLOPS == 4 * 2 * 4 * 128 * 4096 ** 2
    assert p1.dram_bytes == sum(r + w for r, w in synth.DRAM["01"].values())
    assert p1.kernels == ("s_kernel", "softmax_kernel", "pv_kernel")
    assert p2.intensity == pytest.approx(synth.FLOPS / 1.9e7)
    assert p2.tflops == 10.0
    bw = fr.load_ceilings(root)[0]
    assert p2.bandwidth_bound(bw) == pytest.approx(1000.0 * p2.intensity / 1000.0)
    # the least traffic: Q, K, V, O (bf16) and LSE (fp32) once
    assert p1.problem.min_bytes == 4 * 2 * 4 * 4096 * 128 * 2 + 2 * 4 * 4096 * 4


def test_roofline_skips_steps_without_traffic_or_time(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    (root / "test-gpu" / "ncu" / "step02.csv").unlink()
    (root / "test-gpu" / "step03.json").unlink()
    points = pr.roofline_points(fr.load_results(root), fr.load_ncu(root))
    assert [p.step for p in points] == ["01"]


def test_roofline_markdown(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    points = pr.roofline_points(fr.load_results(root), fr.load_ncu(root))
    text = pr.markdown(points, fr.load_ceilings(root))
    assert "(bf16, B = 2, Hq = Hkv = 4, N = 4096, D = 128, non-causal)" in text
    row = next(line for line in text.splitlines() if line.startswith("| 03 online_softmax"))
    # 68.7 GFLOP over 19 MB: 3,617 FLOP per byte, which 1000 GB/s turns into 3,617 TFLOP/s;
    # 20 TFLOPS is 40 % of the 50 TFLOP/s fp32 FMA ceiling and 4.0 % of the 500 GEMM one
    assert row == "| 03 online_softmax | 19.0 MB | 3,617 | 20.0 | 3,617 TFLOP/s | 40 % | 4.0 % |"
    assert "Not measured yet" in pr.markdown([], [])
    no_ceil = pr.markdown(points, [])
    assert "No ceilings measured" in no_ceil and "Bandwidth allows" not in no_ceil


def test_ncu_benchmark_is_the_one_gpu_session_profiles():
    script = (TOOLS.parent / "gpu" / "gpu_session.sh").read_text()
    filters = re.findall(r"--benchmark_filter='([^']+)/'", script)
    assert filters == [pr.NCU_BENCHMARK]


@needs_matplotlib
def test_plot_roofline_deterministic_and_says_what_is_missing(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    out = run_tool("plot_roofline.py", root, "-o", tmp_path / "a" / "r",
                   "--markdown", tmp_path / "a" / "r.md")
    assert out.returncode == 0, out.stderr
    svg = (tmp_path / "a" / "r.svg").read_text()
    assert "Test GPU (synthetic)" in svg and "03 online_softmax" in svg
    assert "copy bandwidth 1,000 GB/s" in svg and "Not measured yet: AMD" in svg
    assert (tmp_path / "a" / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run_tool("plot_roofline.py", root, "-o", tmp_path / "b").returncode == 0
    assert (tmp_path / "b.svg").read_bytes() == (tmp_path / "a" / "r.svg").read_bytes()
    assert (tmp_path / "b.png").read_bytes() == (tmp_path / "a" / "r.png").read_bytes()
    # ceilings without traffic: the panel says so
    bare = synth.make_tree(tmp_path / "bare", ncu=False)
    assert run_tool("plot_roofline.py", bare, "-o", tmp_path / "c").returncode == 0
    assert "no Nsight Compute traffic" in (tmp_path / "c.svg").read_text()
    # nothing at all
    (tmp_path / "empty").mkdir()
    assert run_tool("plot_roofline.py", tmp_path / "empty", "-o", tmp_path / "d").returncode == 0
    text = (tmp_path / "d.svg").read_text()
    assert ">not measured<" in text and "Not measured yet: NVIDIA, AMD" in text


def test_plot_roofline_reports_malformed_input(tmp_path):
    root = synth.make_tree(tmp_path / "results")
    (root / "test-gpu" / "gemm_ceiling.json").write_text("{}")
    out = run_tool("plot_roofline.py", root, "-o", tmp_path / "r")
    assert out.returncode == 2 and "gemm_ceiling.json: gpu_name" in out.stderr


# --- per-step table ------------------------------------------------------------------------

def test_step_table_speedups_and_skips():
    recs = fr.load_results(DATA / "results")
    text = results_table.make_step_table(recs, "02")
    assert "step 02 tiled" in text and "speed-up over step 01 naive" in text
    assert "| 512 | 4.00 (×2.00) |" in text           # 4.0 against step 01's 2.0
    assert "(×—)" in text and "×— = step 01 skipped this benchmark" in text
    assert "**AMD**: step 02 not measured." in text
    first = results_table.make_step_table(recs, "01")
    assert "speed-up" not in first and "[1] skipped:" in first
    assert "step 07 not measured" in results_table.make_step_table(recs, "07")
    out = run_tool("results_table.py", DATA / "results", "--step", "02", "--versus", "01")
    assert out.returncode == 0 and "(×2.00)" in out.stdout


def test_describe_gpu_and_titles_do_not_repeat_the_vendor():
    assert fr.gpu_title("nvidia", "NVIDIA H200") == "NVIDIA H200"
    assert fr.gpu_title("amd", "Instinct MI300X") == "AMD Instinct MI300X"
    rec = fr.load_results(DATA / "results")[0]
    ctx = {**rec.context, "runtime_version": "CUDA 13.0"}
    line = fr.describe_gpu([fr.Record(**{**rec.__dict__, "context": ctx})])
    assert "· CUDA 13.0 ·" in line and "CUDA CUDA" not in line
