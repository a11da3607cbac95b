"""Tests of merge_bench_json.py on synthetic parts (decode_synth.py): what it merges, what it
keeps of each part's context, and what it refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode_synth as ds  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import merge_bench_json as mbj  # noqa: E402

BF16 = {ds.B1: 25.0, ds.B8: 500.0, ds.PREFILL: 80.0}
FP16 = {n.replace("/bf16/", "/fp16/"): us for n, us in BF16.items()}
D64 = {"decode/bf16/hd64/b1/hq32/hkv8/nq1/nk16384/full": 14.0,
       "decode/bf16/hd64/b8/hq32/hkv8/nq1/nk65536/full": "synthetic: skipped"}


def part(points: dict, step: str = "10", date: str = "2000-01-01T00:00:00+00:00", **context) -> dict:
    """A decode-set part as one run of bench_stepNN writes it: family_index from 0, its own
    date and clocks."""
    doc = ds.decode_json(step, points)
    families: dict[str, int] = {}
    for entry in doc["benchmarks"]:
        entry["family_index"] = families.setdefault(fr.base_name(entry), len(families))
        entry["per_family_instance_index"] = 0
    doc["context"].update({"date": date, "sm_clock_mhz_at_start": "1980", "host_name": "gpu-host",
                           "load_avg": [1.0, 0.5, 0.25], **context})
    return doc


def write_parts(tmp_path: Path, *docs: dict) -> list[Path]:
    return [ds.write(tmp_path / "parts" / f"{i:02d}" / ds.GPU / "step10-decode.json", d) for i, d in enumerate(docs)]


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOLS / "merge_bench_json.py"), *map(str, args)],
                          capture_output=True, text=True, check=False)


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    return tmp_path / "results" / ds.GPU / "step10-decode.json"


def test_parts_merge_into_one_file_the_loader_reads(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16, date="2000-01-01T00:01:00+00:00", sm_clock_mhz_at_start="1755"),
                        part(D64, date="2000-01-01T00:02:00+00:00"))
    res = run("-o", out, *paths)
    assert res.returncode == 0, res.stderr
    assert "8 benchmarks from 3 of 3 parts" in res.stdout
    recs = fr.load_file(out, gpu=ds.GPU)
    assert {r.name for r in recs} == set(BF16) | set(FP16) | set(D64)
    assert [r.error for r in recs if r.name in D64] == [None, "synthetic: skipped"]
    by_name = {r.name: r for r in recs}
    assert by_name[ds.B8].counters["us_per_call"] == 500.0
    # The records load as a results tree does, beside other steps.
    assert {r.name for r in fr.load_results(tmp_path / "results")} == {r.name for r in recs}


def test_context_is_the_first_parts_and_every_part_keeps_what_differs(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16, date="2000-01-01T00:01:00+00:00", sm_clock_mhz_at_start="1755",
                                                   load_avg=[2.0, 1.0, 0.5]))
    assert run("-o", out, *paths).returncode == 0
    doc = json.loads(out.read_text())
    ctx = doc["context"]
    first = json.loads(paths[0].read_text())["context"]
    assert {k: v for k, v in ctx.items() if k != mbj.MERGED_KEY} == first
    merged = ctx[mbj.MERGED_KEY]
    assert [m["file"] for m in merged] == [str(p) for p in paths]
    assert [m["benchmarks"] for m in merged] == [3, 3]
    assert "context" not in merged[0]
    assert merged[1]["context"] == {"date": "2000-01-01T00:01:00+00:00", "sm_clock_mhz_at_start": "1755",
                                    "load_avg": [2.0, 1.0, 0.5]}


def test_family_indices_continue_across_parts(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16))
    assert run("-o", out, *paths).returncode == 0
    doc = json.loads(out.read_text())
    families = {fr.base_name(e): e["family_index"] for e in doc["benchmarks"]}
    assert sorted(families.values()) == list(range(6))
    assert [families[n] for n in FP16] == [3, 4, 5]


@pytest.mark.parametrize("key, value", [("git_commit", "00000other"), ("gpu_name", "Other GPU"),
                                        ("gpu_arch", "sm_01"), ("sm_count", "16"), ("host_name", "other-host"),
                                        ("driver_version", "1.0"), ("flashsteps_bench_set", "standard"),
                                        ("flashsteps_num_splits", "4")])
def test_different_commits_gpus_or_settings_are_refused(tmp_path, out, key, value):
    paths = write_parts(tmp_path, part(BF16), part(FP16, **{key: value}))
    res = run("-o", out, *paths)
    assert res.returncode == 1
    assert key in res.stderr and "measured different things" in res.stderr
    assert not out.exists() and not out.with_name(out.name + ".tmp").exists()


def test_different_steps_are_refused(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16, step="06"))
    res = run("-o", out, *paths)
    assert res.returncode == 1 and "flashsteps_step" in res.stderr
    assert not out.exists()


@pytest.mark.parametrize("commit", [None, "", "unknown"])
def test_a_part_without_a_commit_is_refused(tmp_path, out, commit):
    doc = part(FP16)
    if commit is None:
        del doc["context"]["git_commit"]
    else:
        doc["context"]["git_commit"] = commit
    res = run("-o", out, *write_parts(tmp_path, part(BF16), doc))
    assert res.returncode == 1 and "no git_commit" in res.stderr
    assert not out.exists()


def test_a_benchmark_in_two_parts_is_refused(tmp_path, out):
    res = run("-o", out, *write_parts(tmp_path, part(BF16), part({ds.B8: 510.0, **FP16})))
    assert res.returncode == 1 and ds.B8 in res.stderr and "also in" in res.stderr
    assert not out.exists()


def test_the_same_part_twice_is_refused(tmp_path, out):
    path = write_parts(tmp_path, part(BF16))[0]
    res = run("-o", out, path, path)
    assert res.returncode == 1 and "twice" in res.stderr


def test_a_merged_file_is_not_merged_again(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16))
    assert run("-o", out, *paths).returncode == 0
    d64 = write_parts(tmp_path / "more", part(D64))[0]
    res = run("-o", tmp_path / "again.json", out, d64)
    assert res.returncode == 1 and "already a merged file" in res.stderr


def test_a_cut_part_is_an_error_unless_skipped(tmp_path, out):
    paths = write_parts(tmp_path, part(BF16), part(FP16), part(D64))
    text = paths[1].read_text()
    paths[1].write_text(text[: len(text) // 2])  # what a run killed by its time limit leaves
    missing = tmp_path / "parts" / "09" / ds.GPU / "step10-decode.json"  # a run that wrote nothing
    res = run("-o", out, *paths, missing)
    assert res.returncode == 1 and "cannot read JSON" in res.stderr
    assert not out.exists()
    res = run("--skip-unreadable", "-o", out, *paths, missing)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("warning: left out") == 2
    assert "5 benchmarks from 2 of 4 parts" in res.stdout
    assert {r.name for r in fr.load_file(out)} == set(BF16) | set(D64)
    assert [m["file"] for m in json.loads(out.read_text())["context"][mbj.MERGED_KEY]] == [str(paths[0]), str(paths[2])]


def test_nothing_readable_writes_nothing(tmp_path, out):
    path = tmp_path / "cut.json"
    path.write_text('{"context": {')
    res = run("--skip-unreadable", "-o", out, path)
    assert res.returncode == 1 and "nothing to merge" in res.stderr
    assert not out.exists()


def test_a_part_the_loader_rejects_is_an_error_even_when_skipping(tmp_path, out):
    doc = part(FP16)
    del doc["context"]["gpu_vendor"]
    res = run("--skip-unreadable", "-o", out, *write_parts(tmp_path, part(BF16), doc))
    assert res.returncode == 1 and "gpu_vendor" in res.stderr
    assert not out.exists()


def test_split_sweep_parts_merge_into_the_sweep_the_book_reads(tmp_path):
    sweep = ds.default_sweep()
    docs = [ds.sweep_json({name: problem}) for name, problem in sweep.items()]
    paths = [ds.write(tmp_path / "parts" / f"sweep-{i}" / ds.GPU / "runs" / "step10-split-sweep" / "step10.json", d)
             for i, d in enumerate(docs)]
    out = tmp_path / "results" / ds.GPU / "runs" / "step10-split-sweep" / "step10.json"
    assert run("-o", out, *paths).returncode == 0
    runs = fr.load_runs(tmp_path / "results")
    assert len([r for r in runs["step10-split-sweep"] if r.splits is not None]) == 2 * len(ds.COUNTS)


def test_sdpa_backend_files_merge_and_backends_do_not_mix(tmp_path):
    def sdpa(points, backend):
        doc = part(points, step=f"sdpa-{backend}")
        doc["context"].update({"sdpa_backend": backend, "flashsteps_baseline": "pytorch-sdpa"})
        return doc

    a, b = (ds.write(tmp_path / p / "sdpa-cudnn-decode.json", sdpa(pts, "cudnn")) for p, pts in (("a", BF16), ("b", FP16)))
    out = tmp_path / "sdpa-cudnn-decode.json"
    assert run("-o", out, a, b).returncode == 0
    assert len(fr.load_file(out)) == 6
    c = ds.write(tmp_path / "c" / "sdpa-flash-decode.json", sdpa(D64, "flash"))
    res = run("-o", tmp_path / "mixed.json", a, c)
    assert res.returncode == 1 and "sdpa_backend" in res.stderr
