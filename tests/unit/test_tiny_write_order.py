"""Unit test: `make model` marks a finished tiny checkpoint by its config.json (the Makefile's target), so that file is
written last: a Ctrl-C while the weights were written left config.json behind, and every later `make run` skipped
`make model` and started a worker that could not load the folder."""
import pytest

from worker import tiny


def test_an_interrupted_write_leaves_no_config_json(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tiny, "save_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tiny.write_tiny_checkpoint(str(tmp_path))
    assert (tmp_path / "tokenizer.json").exists() and not (tmp_path / "config.json").exists()
