"""bench/output.py (the benches' one CSV writer and output folder) on CPU, and the GPU benches that write through it:
they import without a GPU, and their CSVs keep the columns they wrote before the helper."""
import csv

import pytest

from bench import gpu_dense_gemv, gpu_gdn, gpu_prefill
from bench.output import output_dir, write_csv


def read(path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_columns_are_every_key_in_first_seen_order_empty_where_missing(tmp_path):
    write_csv(tmp_path / "t.csv", [{"a": 1, "b": 2.5}, {"a": "x,y", "c": None}])
    assert (tmp_path / "t.csv").read_bytes() == b'a,b,c\r\n1,2.5,\r\n"x,y",,\r\n'


def test_output_dir_is_out_when_set_and_is_created(tmp_path, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path / "new"))
    assert output_dir() == str(tmp_path / "new") and (tmp_path / "new").is_dir()
    monkeypatch.delenv("OUT")
    assert output_dir().endswith("bench/out")


@pytest.fixture
def no_plot(monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    for module in (gpu_dense_gemv, gpu_gdn, gpu_prefill):
        monkeypatch.setattr(module, "pyplot", lambda *_: None)
    return tmp_path


def test_dense_gemv_csv_keeps_its_columns(no_plot):
    gpu_dense_gemv.save([{"n": 96, "k": 5120, "m": 1, "ours_us": 2.5, "ours_plain_us": 3.0, "torch_us": 9.0,
                          "ours_frac_copy": 0.4}])
    assert read(no_plot / "gpu_dense_gemv.csv") == [
        ["n", "k", "m", "ours_us", "ours_plain_us", "torch_us", "ours_frac_copy"],
        ["96", "5120", "1", "2.5", "3.0", "9.0", "0.4"]]


def test_gdn_csv_leads_with_the_copy_bandwidth_and_fills_decode_only_columns(no_plot):
    gpu_gdn.save([{"kind": "decode", "case": "c", "ours_us": 1.0, "plain_us": 2.0},
                  {"kind": "prefill", "case": "p", "ours_us": 3.0}], 3912.4)
    assert read(no_plot / "gpu_gdn.csv") == [["copy_GBps", "kind", "case", "ours_us", "plain_us"],
                                             ["3912", "decode", "c", "1.0", "2.0"],
                                             ["3912", "prefill", "p", "3.0", ""]]


def test_prefill_csv_has_every_key(no_plot):
    gpu_prefill.save([{"case": "a", "eager_ms": 1.5}, {"case": "b", "eager_ms": 2.0, "logits_rel": 0.01}])
    assert read(no_plot / "gpu_prefill.csv") == [["case", "eager_ms", "logits_rel"], ["a", "1.5", ""],
                                                 ["b", "2.0", "0.01"]]
