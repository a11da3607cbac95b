"""tools/gpu/clock_summary.py on hand-made nvidia-smi samples and phase marks."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import clock_summary as cs  # noqa: E402

CSV = """timestamp, clocks.current.sm [MHz], power.draw [W], temperature.gpu, utilization.gpu [%]
2026/12/01 21:21:20.100, 1980 MHz, 81.30 W, 35, 0 %
2026/12/01 21:21:20.200, 1980 MHz, 300.00 W, 40, 100 %
2026/12/01 21:21:20.300, 1710 MHz, 650.00 W, 50, 100 %
2026/12/01 21:21:20.400, 1725 MHz, 690.00 W, 52, 95 %
2026/12/01 21:21:20.500, 1980 MHz, 90.00 W, 50, 10 %
2026/12/01 21:21:20.600, 1965 MHz, 400.00 W, 50, 100 %
2026/12/01 21:21:20.700, [N/A], [N/A], 50, 100 %
"""
PHASES = """2026/12/01 21:21:20.150 start sdpa
2026/12/01 21:21:20.450 end sdpa
2026/12/01 21:21:20.550 start bench
2026/12/01 21:21:20.750 end bench
2026/12/01 21:21:20.760 start never ended
"""


def test_summary_per_phase(tmp_path, capsys):
    (tmp_path / "c.csv").write_text(CSV)
    (tmp_path / "p.txt").write_text(PHASES)
    rows = cs.summarize(cs.read_samples(tmp_path / "c.csv"), cs.read_phases(tmp_path / "p.txt"), 90)
    assert [r["phase"] for r in rows] == ["sdpa", "bench"]
    assert rows[0]["samples"] == 3 and rows[0]["busy"] == 3
    assert rows[0]["sm_mhz"] == (1725, 1710, 1980) and rows[0]["power_w"] == (650, 300, 690)
    assert rows[1]["sm_mhz"] == (1965, 1965, 1965) and rows[1]["samples"] == 2 and rows[1]["busy"] == 1  # [N/A] left out
    assert cs.main([str(tmp_path / "c.csv"), str(tmp_path / "p.txt")]) == 0
    out = capsys.readouterr().out
    assert "| sdpa | 0 | 3 (3) | 1725 (1710-1980) | 650 (300-690) |" in out


def test_no_phases(tmp_path, capsys):
    (tmp_path / "c.csv").write_text(CSV)
    (tmp_path / "p.txt").write_text("")
    assert cs.main([str(tmp_path / "c.csv"), str(tmp_path / "p.txt")]) == 1
    assert cs.main([str(tmp_path / "missing.csv"), str(tmp_path / "p.txt")]) == 2
