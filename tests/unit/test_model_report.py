"""bench/model_report.py (the decode-step bench's report) on CPU: the CSV holds every row's fields, the table one
line per row with its figures."""
import csv
import importlib.util

from bench import model_report

ROWS = [{"state": "+wgmma", "C": 1, "bytes": 14.79e9, "roofline_ms": 3.5, "graph_ms": 6.6, "graph_tok_s": 151.5,
         "graph_frac": 0.53},
        {"state": "+wgmma", "C": 32, "bytes": 25.5e9, "roofline_ms": 5.89, "graph_ms": 12.69, "graph_tok_s": 2521.7,
         "graph_frac": 0.464}]


def test_csv_has_every_row_and_field(tmp_path):
    model_report.write_outputs(ROWS, str(tmp_path))
    with open(tmp_path / "gpu_model.csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert [r["C"] for r in got] == ["1", "32"] and float(got[1]["graph_tok_s"]) == 2521.7
    assert set(got[0]) == set(ROWS[0])
    if importlib.util.find_spec("matplotlib"):  # the plot beside it
        assert (tmp_path / "gpu_model.png").stat().st_size > 1000


def test_nothing_written_without_an_output_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model_report.write_outputs(ROWS, None)
    assert list(tmp_path.iterdir()) == []


def test_table_prints_each_row_with_its_figures(capsys):
    model_report.print_table(ROWS, 4.2e12, "64 layers, ctx 256, float32 GDN state")
    out = capsys.readouterr().out.splitlines()
    assert "copy bandwidth 4.20 TB/s" in out[1] and "ctx 256" in out[1]
    row = next(line for line in out if line.split()[:2] == ["+wgmma", "32"])
    assert "12.69" in row and "2522" in row and "46.4%" in row and row.split()[4] == "-"  # no eager figures
