"""Unit test: the server settings in the shell that runs `make test` do not reach the tests (tests/conftest.py). A
SPARKINFER_API_KEY exported for the user's own `make run` made every e2e request a 401 (test_list_models:
openai.AuthenticationError); SPARKINFER_MAX_MODEL_LEN or _SERVED_MODEL_NAME changed what the stacks answered."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "TEST_ENV_PROBE"  # set for the child pytest alone


@pytest.mark.skipif(PROBE not in os.environ, reason="run by the test below in a child pytest")
def test_probe_environment():
    print("SEEN", sorted(name for name in os.environ if name.startswith("SPARKINFER_")))


def test_a_shells_server_settings_do_not_reach_the_tests():
    shell = {"SPARKINFER_API_KEY": "secret", "SPARKINFER_MAX_MODEL_LEN": "512", "SPARKINFER_SERVED_MODEL_NAME": "mine",
             "SPARKINFER_PORT": "8081", "SPARKINFER_CUDA_GRAPHS": "0", "SPARKINFER_GDN_DECODE_BF16": "regs",
             "SPARKINFER_DEVICE": "cpu"}
    base = {k: v for k, v in os.environ.items() if not k.startswith("SPARKINFER_")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                             f"{__file__}::test_probe_environment"], cwd=REPO, env={**base, **shell, PROBE: "1"},
                            capture_output=True, text=True, timeout=120)
    seen = [line for line in result.stdout.splitlines() if line.startswith("SEEN")]
    assert seen == ["SEEN ['SPARKINFER_CUDA_GRAPHS', 'SPARKINFER_DEVICE', 'SPARKINFER_GDN_DECODE_BF16']"], result.stdout
