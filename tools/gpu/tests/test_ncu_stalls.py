"""tools/gpu/ncu_stalls.py on hand-made Nsight Compute source-page exports."""
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ncu_stalls as ns  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "ncu_stalls.py"

HEADER = (
    '"Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed",'
    '"stall_math","stall_short_sb","stall_wait","stall_selected","stall_wait (Not Issued)"\n'
)
ROWS = [
    '"0x10","      HMMA.16816.F32.BF16 R100, R200, R104, RZ","60","60","131072","10","5","40","5","38"',
    '"0x20","      HMMA.16816.F32.BF16 R104, R200, R106, R104","50","50","131072","0","0","45","5","44"',
    '"0x30","@!P0  MUFU.EX2 R1, R2","30","30","65,536","0","20","8","2","8"',
    '"0x40","      LDSM.16.M88.4 R8, [R250+0x5100]","7","7","1024","0","0","-","7","-"',
    '"0x50","","0","0","0","0","0","0","0","0"',
]
KERNEL = '"Kernel Name","void attention_kernel<...>(...)"\n'


def write(path: Path, rows, gz=False):
    text = KERNEL + HEADER + "\n".join(rows) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def test_opcode_drops_predicate_and_modifiers():
    assert ns.opcode("@!P0 HMMA.16816.F32.BF16 R1, R2, R3, R4") == "HMMA"
    assert ns.opcode("   FADD R1, R2, R3") == "FADD"
    assert ns.opcode("") == ""


def test_totals_per_opcode(tmp_path):
    write(tmp_path / "a.csv.gz", ROWS, gz=True)
    s = ns.read_source(tmp_path / "a.csv.gz")
    assert set(s) == {"HMMA", "MUFU", "LDSM"}
    assert (s["HMMA"].executed, s["HMMA"].samples) == (262144, 110)
    assert s["HMMA"].reasons == {"math": 10, "short_sb": 5, "wait": 85, "selected": 10}
    assert (s["MUFU"].executed, s["MUFU"].samples) == (65536, 30)
    assert s["LDSM"].reasons == {"selected": 7}
    t = ns.total(s)
    assert (t.executed, t.samples, t.reasons["wait"]) == (328704, 147, 93)


def test_table_side_by_side(tmp_path):
    write(tmp_path / "a.csv", ROWS)
    write(tmp_path / "b.csv", ROWS[2:])  # no HMMA in the second kernel
    a, b = ns.read_source(tmp_path / "a.csv"), ns.read_source(tmp_path / "b.csv")
    lines = ns.table([("mine", a), ("theirs", b)], top=1).splitlines()
    assert lines[2] == "| HMMA | 262,144 | 110 | wait 85 | – | – | – |"
    assert lines[3] == "| MUFU | 65,536 | 30 | short_sb 20 | 65,536 | 30 | short_sb 20 |"
    assert lines[-1] == "| all | 328,704 | 147 | wait 93 | 66,560 | 37 | short_sb 20 |"


def test_rest_summed_past_rows(tmp_path):
    write(tmp_path / "a.csv", ROWS)
    lines = ns.table([("k", ns.read_source(tmp_path / "a.csv"))], top=2, rows=1).splitlines()
    assert lines[3] == "| 2 others | 66,560 | 37 | short_sb 20, selected 9 |"


def test_errors(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text('"x","y"\n"1","2"\n')
    assert ns.main([f"k={tmp_path / 'bad.csv'}"]) == 1
    assert "bad.csv: no header row" in capsys.readouterr().err
    assert ns.main(["nolabel"]) == 2
    assert ns.main([f"a|b={tmp_path / 'bad.csv'}"]) == 2
    assert ns.main([f"k={tmp_path / 'missing.csv'}"]) == 1
    assert "missing.csv" in capsys.readouterr().err


def test_bad_exports_name_the_file(tmp_path, capsys):
    no_samples = '"Address","Source","Instructions Executed"\n"0x10","FADD R1, R2, R3","5"\n'
    (tmp_path / "nocol.csv").write_text(KERNEL + no_samples)
    assert ns.main([f"k={tmp_path / 'nocol.csv'}"]) == 1
    assert "nocol.csv: no column \"# Samples\"" in capsys.readouterr().err
    write(tmp_path / "word.csv", [ROWS[0].replace('"131072"', '"many"')])
    assert ns.main([f"k={tmp_path / 'word.csv'}"]) == 1
    assert "word.csv, line 3, column \"Instructions Executed\": 'many' is not a count" in capsys.readouterr().err
    write(tmp_path / "two.csv", ROWS + [HEADER.strip()] + ROWS)
    assert ns.main([f"k={tmp_path / 'two.csv'}"]) == 1
    assert "2 header rows" in capsys.readouterr().err
    write(tmp_path / "full.csv.gz", ROWS, gz=True)
    (tmp_path / "cut.csv.gz").write_bytes((tmp_path / "full.csv.gz").read_bytes()[:-12])
    assert ns.main([f"k={tmp_path / 'cut.csv.gz'}"]) == 1
    assert "cut.csv.gz" in capsys.readouterr().err
    assert ns.main(["--parts", "HMMA", "x", f"k={tmp_path / 'full.csv.gz'}"]) == 2
    assert "--parts K" in capsys.readouterr().err


def test_gzip_found_by_content_and_bom_accepted(tmp_path):
    write(tmp_path / "packed.csv", ROWS, gz=True)  # compressed, without .gz in its name
    (tmp_path / "bom.csv").write_text("\ufeff" + HEADER + "\n".join(ROWS) + "\n", encoding="utf-8")
    for name in ("packed.csv", "bom.csv"):
        assert ns.read_source(tmp_path / name)["HMMA"].samples == 110


def test_sorted_by_first_kernels_samples_then_the_rest(tmp_path, capsys):
    # FADD: most executed, fewest samples; IMAD and LOP3 only in the second kernel
    a = [
        '"0x10","FADD R1, R2, R3","1","1","900000","0","0","1","0","1"',
        '"0x20","MUFU.EX2 R1, R2","9","9","10","0","9","0","0","0"',
        '"0x30","HMMA.16816.F32.BF16 R1, R2, R3, R4","5","5","20","5","0","0","0","0"',
    ]
    b = [
        '"0x10","LOP3.LUT R1, R2, R3, RZ","2","2","4","0","0","2","0","2"',
        '"0x20","IMAD R1, R2, R3, R4","8","8","4","0","0","8","0","8"',
        '"0x30","FADD R1, R2, R3","3","3","4","0","0","3","0","3"',
    ]
    write(tmp_path / "a.csv", a)
    write(tmp_path / "b.csv", b)
    assert ns.main(["--rows", "4", "--top", "1", f"a={tmp_path / 'a.csv'}", f"b={tmp_path / 'b.csv'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    firsts = [line.split(" | ")[0] for line in lines[2:]]
    assert firsts == ["| MUFU", "| HMMA", "| FADD", "| IMAD", "| 1 others", "| all"]
    assert lines[-2] == "| 1 others | – | – | – | 4 | 2 | wait 2 |"
    assert lines[-1] == "| all | 900,030 | 15 | short_sb 9 | 12 | 13 | wait 13 |"


LOOP = [  # a loop body run 131072 times: two HMMA runs, the second interleaved with FMULs
    '"0x100","      HMMA.16816.F32.BF16 R1, R2, R3, RZ","10","10","131072","0","0","8","2","8"',
    '"0x110","      HMMA.16816.F32.BF16 R5, R2, R4, RZ","12","12","131072","0","0","9","3","9"',
    '"0x120","      MUFU.EX2 R9, R1","4","4","131072","0","4","0","0","0"',
    '"0x130","      HMMA.16816.F32.BF16 R10, R6, R7, R10","3","3","131072","3","0","0","0","0"',
    '"0x140","      FMUL R11, R11, R12","2","2","131072","0","0","2","0","2"',
    '"0x150","      FMUL R13, R13, R12","1","1","131072","0","0","1","0","1"',
    '"0x160","      HMMA.16816.F32.BF16 R14, R6, R8, R14","5","5","131072","4","0","1","0","1"',
    '"0x170","      HMMA.16816.F32.BF16 R20, R6, R8, RZ","7","7","16384","0","0","7","0","7"',  # odd: left out
    '"0x180","      HMMA.16816.F32.BF16 R24, R6, R8, RZ","0","0","0","0","0","0","0","0"',  # never run
]


def test_parts_cut_each_region_in_order(tmp_path):
    write(tmp_path / "k.csv", LOOP)
    runs = ns.parts(ns.read_instructions(tmp_path / "k.csv"), "HMMA", 2)
    assert [(r.executed, r.index, r.count, r.span, r.stats.samples) for r in runs] == [
        (131072, 1, 2, 2, 22),
        (131072, 2, 2, 4, 8),
    ]
    assert runs[0].stats.reasons == {"wait": 17, "selected": 5}
    assert runs[1].stats.reasons == {"math": 7, "wait": 1}


def test_parts_table_and_cli(tmp_path, capsys):
    write(tmp_path / "k.csv", LOOP)
    assert ns.main(["--parts", "HMMA", "2", "--top", "1", f"k={tmp_path / 'k.csv'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| kernel | region (times run) | run | HMMA | span | samples | main reasons |"
    assert lines[2:] == ["| k | 131,072 | 1 | 2 | 2 | 22 | wait 17 |", "| k | 131,072 | 2 | 2 | 4 | 8 | math 7 |"]
    assert ns.main(["--parts", "HMMA", "0", f"k={tmp_path / 'k.csv'}"]) == 2


REGIONS = [  # a first tile written out on its own (run 16384 times), then the loop (114688)
    '"0x10","HMMA.16816.F32.BF16 R1, R2, R3, RZ","4","4","16384","0","0","4","0","4"',
    '"0x20","HMMA.16816.F32.BF16 R5, R2, R4, R5","2","2","16384","2","0","0","0","0"',
    '"0x30","HMMA.16816.F32.BF16 R1, R2, R3, RZ","9","9","114688","0","0","9","0","9"',
    '"0x40","FMUL R6, R6, R7","1","1","114688","0","0","1","0","1"',
    '"0x50","HMMA.16816.F32.BF16 R5, R2, R4, R5","3","3","114688","3","0","0","0","0"',
    '"0x60","HMMA.16816.F32.BF16 R8, R2, R4, RZ","0","0","0","0","0","0","0","0"',  # never run: no region
    '"0x70","HMMA.16816.F32.BF16 R9, R2, R4, RZ","0","0","0","0","0","0","0","0"',
    '"0x80","HMMA.16816.F32.BF16 R1, R2, R3, RZ","6","6","16384","0","0","6","0","6"',  # odd, after: left out
]


def test_regions_in_address_order_never_run_and_odd_left_out(tmp_path, capsys):
    write(tmp_path / "r.csv", REGIONS)
    ins = ns.read_instructions(tmp_path / "r.csv")
    assert ns.regions(ins, "HMMA") == [[0, 1], [2, 4], [7]]
    left: list[str] = []
    runs = ns.parts(ins, "HMMA", 2, left)
    assert [(r.executed, r.index, r.span, r.stats.samples) for r in runs] == [
        (16384, 1, 1, 4),
        (16384, 2, 1, 2),
        (114688, 1, 1, 9),
        (114688, 2, 1, 3),
    ]
    assert left == ["1 HMMA run 16,384 times: not a multiple of 2"]
    assert ns.main(["--parts", "HMMA", "2", f"k={tmp_path / 'r.csv'}"]) == 0
    assert "left out 1 HMMA run 16,384 times" in capsys.readouterr().err
    assert ns.main(["--parts", "FFMA", "2", f"k={tmp_path / 'r.csv'}"]) == 1
    assert "no FFMA instruction that ran" in capsys.readouterr().err


REAL = Path(__file__).resolve().parents[3] / "results/nvidia-h100/runs/step06-levers-d9b422e/call1/source-v0.csv.gz"


def test_a_real_export():
    """Step 06's kernel as Nsight Compute exported it (the run folder's README quotes these)."""
    ins = ns.read_instructions(REAL)
    t = ns.total(ns.by_opcode(ins))
    assert (t.executed, t.samples, t.reasons["wait"]) == (190321408, 55511, 20031)
    runs = ns.parts(ins, "HMMA", 2)
    assert [(r.executed, r.count, r.span, r.stats.samples, r.stats.reasons["wait"]) for r in runs] == [
        (131072, 128, 200, 10629, 4738),
        (131072, 128, 153, 9144, 5757),
    ]


ENDS = [  # a block run by 16384 warps: set-up, a loop of 4 tiles, a branch taken by half, the epilogue
    '"0x10","LDC R1, c[0x0][0x28]","5","5","16384","0","0","5","0","5"',
    '"0x20","IMAD R2, R3, R4, RZ","3","3","16384","0","0","2","1","2"',
    '"0x30","LDGSTS.E.BYPASS.128 [R5], desc[UR4][R6.64]","2","2","16384","0","0","1","1","1"',
    '"0x40","HMMA.16816.F32.BF16 R1, R2, R3, RZ","9","9","65536","0","0","9","0","9"',
    '"0x50","LDGSTS.E.BYPASS.128 [R5], desc[UR4][R6.64]","4","4","65536","0","0","4","0","4"',
    '"0x60","BRA 0x40","1","1","65536","0","0","0","1","0"',
    '"0x70","MUFU.RCP R7, R8","6","6","16384","0","6","0","0","0"',
    '"0x80","BSYNC B0","2","2","32768","0","0","2","0","2"',  # two paths meet: counted twice
    '"0x90","STG.E.128 desc[UR4][R10.64], R12","3","3","16384","0","0","3","0","3"',
    '"0xa0","EXIT","0","0","16384","0","0","0","0","0"',
]


def test_ends_cut_at_the_first_copy_and_the_last_loop(tmp_path):
    write(tmp_path / "e.csv", ENDS)
    cut = ns.ends(ns.read_instructions(tmp_path / "e.csv"), "LDGSTS")
    assert [(p.name, p.rows, p.per_warp, p.stats.executed, p.stats.samples) for p in cut] == [
        ("start", 2, 2.0, 32768, 8),
        ("middle", 4, 13.0, 212992, 16),
        ("end", 4, 5.0, 81920, 11),
    ]
    assert cut[2].stats.reasons == {"short_sb": 6, "wait": 5}


def test_ends_table_and_cli(tmp_path, capsys):
    write(tmp_path / "e.csv", ENDS)
    assert ns.main(["--ends", "LDGSTS", "--top", "1", f"k={tmp_path / 'e.csv'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| kernel | part | rows | per warp | executed | samples | share | main reasons |"
    assert lines[2:] == [
        "| k | start | 2 | 2 | 32,768 | 8 | 22.9% | wait 7 |",
        "| k | middle | 4 | 13 | 212,992 | 16 | 45.7% | wait 14 |",
        "| k | end | 4 | 5 | 81,920 | 11 | 31.4% | short_sb 6 |",
    ]
    write(tmp_path / "flat.csv", ENDS[:3] + ENDS[6:])  # no loop: nothing ran more than twice
    assert ns.main(["--ends", "LDGSTS", f"k={tmp_path / 'e.csv'}", f"flat={tmp_path / 'flat.csv'}"]) == 1
    captured = capsys.readouterr()
    assert "flat: no cut at LDGSTS: no loop" in captured.err
    assert captured.out.splitlines()[2].startswith("| k | start |")
    with pytest.raises(SystemExit) as both:  # --ends and --parts are two different tables
        ns.main(["--ends", "LDGSTS", "--parts", "HMMA", "2", f"k={tmp_path / 'e.csv'}"])
    assert both.value.code == 2
    assert "not allowed with argument --ends" in capsys.readouterr().err
    with pytest.raises(SystemExit) as empty:
        ns.main(["--ends", " ", f"k={tmp_path / 'e.csv'}"])
    assert empty.value.code == 2


def test_ends_say_why_there_is_no_cut(tmp_path, capsys):
    ins = ns.read_instructions
    cases = {
        "no LDSM in the export": ENDS,
        "first instruction never ran": [ENDS[0].replace('"16384"', '"0"', 1)] + ENDS[1:],
        "no LDGSTS that ran": [
            r.replace('"16384"', '"0"').replace('"65536"', '"0"') if "LDGSTS" in r else r for r in ENDS
        ],
        "its last loop ends before the first LDGSTS": ENDS[:2] + ENDS[3:4] + ENDS[5:6] + ENDS[2:3] + ENDS[6:],
        "1 instructions before the first LDGSTS ran more than twice": ENDS[:2] + ENDS[3:4] + ENDS[2:3] + ENDS[4:],
    }
    for i, (why, rows) in enumerate(cases.items()):
        write(tmp_path / f"c{i}.csv", rows)
        got = ns.ends(ins(tmp_path / f"c{i}.csv"), "LDSM" if why.startswith("no LDSM") else "LDGSTS")
        assert isinstance(got, str) and why in got, (why, got)
    assert ns.main(["--ends", "LDGSTS", f"x={tmp_path / 'c1.csv'}"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # no kernel cut: no empty table
    assert "x: no cut at LDGSTS: its first instruction never ran" in captured.err


def test_ends_of_a_real_export():
    """Step 06's block start and end, as the chapter and the run folder's README quote them."""
    cut = ns.ends(ns.read_instructions(REAL), "LDGSTS")
    assert [(p.name, p.rows, round(p.per_warp), p.stats.samples) for p in cut] == [
        ("start", 354, 217, 1127),
        ("middle", 1612, 10787, 50822),
        ("end", 2506, 612, 3562),
    ]


STEP09_RUN = Path(__file__).resolve().parents[3] / "results/nvidia-h200/runs/step09-e2474fd"
STEP09 = STEP09_RUN / "ncu/bf16_hd128_n8192_full.source.csv.gz"


def test_ends_refuse_a_warp_specialised_kernel():
    """Step 09's producer copies after the consumers' loop in address order: no set-up, loop, epilogue."""
    got = ns.ends(ns.read_instructions(STEP09), "UTMALDG")
    assert isinstance(got, str) and "a loop before the cut" in got
    assert ns.ends(ns.read_instructions(STEP09), "LDGSTS") == "no LDGSTS in the export"


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    """`ncu_stalls.py ... | head -1`: the table is longer than what the reader takes."""
    path = tmp_path / "k.csv"
    many = [f'"0x{16 * i:x}","OP{i} R1, R2","1","1","32","0","0","1","0","1"' for i in range(1, 5001)]
    write(path, many)  # 5000 opcodes: a table far larger than the pipe's buffer
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--rows", "100000", f"a={path}", f"b={path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_reader_gone_before_a_short_table_gets_no_traceback(tmp_path):
    """A table that fits the pipe's buffer, buffered stdout, and a reader already gone: the
    broken pipe shows only at the final flush."""
    path = tmp_path / "k.csv"
    write(path, ROWS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), f"a={path}"], stdout=w, stderr=subprocess.PIPE, env=env, timeout=60
        )
    finally:
        os.close(w)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
