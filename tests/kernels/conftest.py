"""Fixtures the GPU test modules share."""
import os

import pytest

from worker.tiny import write_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    """The tiny checkpoint folder: models/tiny where `make model` wrote it, else one written for these tests."""
    if os.path.isfile("models/tiny/config.json"):
        return "models/tiny"
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path
