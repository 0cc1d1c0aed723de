"""The harness: its commands (pipeline_fixtures.sh/start) see the session's environment; the order of the tests
and of the background pipeline runs (tests/conftest.py)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

from pipeline_fixtures import Background, env, sh


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


def _conftest(config):
    """tests/conftest.py as pytest loaded it (importing it again would run its session setup twice)."""
    return next(p for p in config.pluginmanager.get_plugins()
                if str(getattr(p, "__file__", "")).endswith(os.path.join("tests", "conftest.py")))


class _Item:
    def __init__(self, nodeid: str, *fixtures: str):
        self.nodeid, self.fixturenames = nodeid, list(fixtures)


def test_the_pipeline_tests_go_before_the_threaded_ones_and_the_second_run_last(request):
    """On 2 cores the test process is the suite's critical path: the pipeline tests (one core, DVC commands) run
    beside the second clean run, the threaded tests after them, what waits for the second run last."""
    conftest = _conftest(request.config)
    items = [_Item("tests/pipeline/test_repro.py::a", "built_pipeline", "second_pipeline_run"),
             _Item("tests/training/test_loop.py::b", "tmp_path"),
             _Item("tests/pipeline/test_repro.py::c", "built_pipeline"),
             _Item("tests/test_runs.py::d"),
             _Item("tests/test_scifact.py::e", "scifact_base_encoding"),
             _Item("tests/runtimes/test_openvino.py::f"),
             _Item("tests/core/test_guard.py::g", "tmp_path"),
             _Item("tests/training/test_stage.py::h", "built_pipeline")]
    conftest.pytest_collection_modifyitems(items)
    assert [i.nodeid[-1] for i in items] == ["d", "g", "c", "h", "b", "f", "a", "e"]


def test_the_second_run_starts_when_the_first_has_ended_even_if_it_failed(request):
    first_may_end, order = threading.Event(), []

    def first():
        first_may_end.wait(10)
        order.append("first")
        raise RuntimeError("the first run failed")

    conftest_after = _conftest(request.config)._after
    started = Background(first)
    second = Background(conftest_after, started, lambda: order.append("second") or "made")
    time.sleep(0.2)
    assert order == []  # the second waits
    first_may_end.set()
    assert second.result() == "made" and order == ["first", "second"]
    assert Background(conftest_after, None, lambda: "alone").result() == "alone"  # no first run: at once


def test_what_collection_imported_is_frozen_out_of_the_garbage_collectors_walks():
    # conftest's pytest_collection_finish: without it, nothing is frozen (0); this file alone imports 60,000
    # objects' worth (pytest, the harness), the whole suite about 620,000
    frozen = gc.get_freeze_count()
    assert frozen > 10_000, frozen
