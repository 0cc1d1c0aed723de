from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest
from beir_fixtures import REPO, SCIFACT, scifact_encode_skip_reason
from pipeline_fixtures import (
    Background,
    build_pipeline,
    clone_working_tree,
    encode_in_background,
    freeze_environment,
    second_run_killed_and_recovered,
    stage_graph,
    stop_all,
)

from retrieval_lab.cli import keep_freed_memory
from retrieval_lab.runtimes.openvino import without_telemetry

# DVC writes a site cache under the user's home unless told otherwise; keep it in the test tree.
os.environ.setdefault("DVC_SITE_CACHE_DIR", str(REPO / ".dvc-site-cache"))
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# Set before torch loads its OpenMP runtime: while the background pipeline runs hold the cores, a
# test's waiting OpenMP threads sleep instead of spinning (spinning burns the CPU they wait for).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The suite's own process allocates as every command does: model loads and in-process commands reuse
# freed memory instead of faulting in new pages.
keep_freed_memory()
# OpenVINO, which the runtime tests import, would send usage events on import and keep a client id in ~/intel:
# the suite, like the commands, sends and writes nothing of the kind.
without_telemetry()
# What every command the tests start sees, taken once here, after the settings above.
freeze_environment()


# Fixtures that are long background jobs (two whole pipeline runs, SciFact's corpus encode), started
# before the first test (see below).
PIPELINE_RUNS = ("built_pipeline", "second_pipeline_run", "scifact_base_encoding")


_STARTED_BEFORE_COLLECTION: dict[str, Background] = {}


def _runs_the_pipeline_tests(config: pytest.Config) -> bool:
    """Whether this session surely selects the pipeline tests: folders holding tests/pipeline named (or none, so
    testpaths), no option that deselects (-k, -m, --deselect, --lf, --sw) and not --collect-only."""
    options = ("keyword", "markexpr", "deselect", "lf", "stepwise", "collectonly")
    if any(config.getoption(name, None) for name in options):
        return False
    holders = {REPO, REPO / "tests", REPO / "tests" / "pipeline"}
    return all(Path(arg).resolve() in holders for arg in config.args)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--scifact-fp32", action="store_true",
                     help="run SciFact's corpus encode (tests/test_scifact.py) on a CPU without native bf16 too: "
                          "about 9 minutes of CPU in fp32")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The whole suite starts its first pipeline run before collection (about 15 s of one core, the other idle
    meanwhile); :func:`_pipeline_runs` takes it over. Any other selection starts it after collection, if wanted."""
    if _runs_the_pipeline_tests(session.config):
        where = session.config._tmp_path_factory.mktemp("pipeline") / "repo"
        _STARTED_BEFORE_COLLECTION["built_pipeline"] = Background(build_pipeline, where)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Whatever still runs stops with the session, a run started before a collection that failed too."""
    stop_all()


# Tests whose model work runs on torch's threads, every core. They go after the pipeline tests, which run DVC
# commands one after another on one core beside the second clean run (``pipeline_fixtures.LOW_PRIORITY``):
# before, the pipeline tests came last, alone, with one core idle for their last 90 s (2026-12-07, 2-core Zen 3).
THREADED_TESTS = ("tests/training/", "tests/runtimes/", "tests/test_encoder.py", "tests/commands/test_encode.py",
                  "tests/scripts/test_check_gpu.py", "tests/scripts/test_bench_finetune_peers.py",
                  "tests/scripts/test_bench_encode.py", "tests/scripts/test_bench_train_levers.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The one-thread tests first, overlapping the pipeline runs; then the tests that wait for the first run,
    then the :data:`THREADED_TESTS`, and last those waiting for the second run or SciFact's encode (ready
    latest). The order within each group is kept.
    """
    def rank(item: pytest.Item) -> int:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"second_pipeline_run", "scifact_base_encoding"}:
            return 3
        if "built_pipeline" in names:
            return 1
        return 2 if item.nodeid.startswith(THREADED_TESTS) else 0

    items.sort(key=rank)  # stable


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, transformers, DVC: about 620,000 objects) lives to the end: frozen, the
    cyclic garbage collector no longer walks it at every full collection, and the sentence-transformers
    trainer asks for one at each start (accelerate's ``free_memory``). 2026-12-07, four test files: 10.9 s of
    collections without, 4.7 s with."""
    gc.collect()
    gc.freeze()


def _after(first: Background | None, fn, *args):
    """``fn(*args)`` once ``first`` (if any) has ended (``pipeline_fixtures.LOW_PRIORITY`` says why)."""
    if first is not None:
        first.wait()
    return fn(*args)


@pytest.fixture(scope="session", autouse=True)
def _pipeline_runs(request, tmp_path_factory) -> dict[str, Background]:
    """Start the pipeline runs the selected tests need, each in a thread, before the first test runs.

    The runs and the other tests then share the cores: what one leaves idle (DVC, imports, the
    one-core lexical stages and tests) another uses. A failed run fails the tests that wait for it.
    """
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())
              if name in PIPELINE_RUNS}
    runs = {}
    early = _STARTED_BEFORE_COLLECTION.pop("built_pipeline", None)  # unwanted: pytest_sessionfinish stops it
    if "built_pipeline" in wanted:  # the second run and SciFact's encode run apart from it
        runs["built_pipeline"] = early or Background(build_pipeline, tmp_path_factory.mktemp("pipeline") / "repo")
    if "second_pipeline_run" in wanted:
        second = clone_working_tree(tmp_path_factory.mktemp("second") / "repo")
        runs["second_pipeline_run"] = Background(_after, runs.get("built_pipeline"), second_run_killed_and_recovered,
                                                 second, stage_graph(second))
    if ("scifact_base_encoding" in wanted and (SCIFACT / "corpus.jsonl").exists()
            and scifact_encode_skip_reason(request.config.getoption("scifact_fp32")) is None):
        runs["scifact_base_encoding"] = Background(encode_in_background, SCIFACT,
                                                   tmp_path_factory.mktemp("scifact") / "emb")
    yield runs
    stop_all()


@pytest.fixture(scope="session")
def built_pipeline(_pipeline_runs):
    """The working tree's pipeline after one clean ``dvc repro`` (a ``pipeline_fixtures.Build``), shared.

    A test that changes the copy puts it back as it found it.
    """
    build = _pipeline_runs["built_pipeline"].result()
    print(f"full dvc repro of the embedded pipeline: {build.seconds:.0f} s")
    return build


@pytest.fixture(scope="session")
def second_pipeline_run(_pipeline_runs):
    """A second clean run, SIGKILLed in one stage and recovered (a ``pipeline_fixtures.KilledRun``)."""
    return _pipeline_runs["second_pipeline_run"].result()


@pytest.fixture(scope="session")
def scifact_base_encoding(scifact_dir, _pipeline_runs, request):
    """The ``encode`` command's embeddings folder of SciFact with the base model (a ``Path``), made in the
    background (``pipeline_fixtures.encode_in_background``); skipped, saying why, where the suite cannot afford it
    (``beir_fixtures.scifact_encode_skip_reason``)."""
    reason = scifact_encode_skip_reason(request.config.getoption("scifact_fp32"))
    if reason:
        pytest.skip(reason)
    return _pipeline_runs["scifact_base_encoding"].result()


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    if not (SCIFACT / "corpus.jsonl").exists():
        pytest.skip(f"SciFact not found at {SCIFACT} (the shared data folder is absent)")
    return SCIFACT


@pytest.fixture(scope="session")
def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()  # read before any module fixture could change it


@pytest.fixture(autouse=True)
def _torch_threads_restored(_torch_threads):
    """A test or module fixture may pin torch to one thread; the tests after it get every core back.

    torch's thread count is process-wide: one module that set it to 1 made the SciFact
    encode, later in the session, run on one core (252 s instead of about 150 s).
    """
    yield
    torch = sys.modules["torch"]
    if torch.get_num_threads() != _torch_threads:
        torch.set_num_threads(_torch_threads)
