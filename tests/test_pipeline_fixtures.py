"""The harness's commands (pipeline_fixtures.sh/start): what they run in sees the session's environment."""

from __future__ import annotations

import sys

from pipeline_fixtures import env, sh


def test_a_tests_own_setenv_never_reaches_the_commands_the_tests_start(monkeypatch, tmp_path):
    # The two clean pipeline runs go on in background threads while other tests run: one that set
    # OMP_NUM_THREADS for itself gave the second run another thread count (other rounding, other bytes).
    before = env()
    monkeypatch.setenv("OMP_NUM_THREADS", before["OMP_NUM_THREADS"] + "7")
    monkeypatch.setenv("RETRIEVAL_LAB_TEST_ONLY", "x")
    assert env() == before
    script = "import os; print(os.environ['OMP_NUM_THREADS'], os.environ.get('RETRIEVAL_LAB_TEST_ONLY'))"
    shown = sh([sys.executable, "-c", script], tmp_path).stdout.split()
    assert shown == [before["OMP_NUM_THREADS"], "None"]
