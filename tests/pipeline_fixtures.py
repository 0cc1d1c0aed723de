"""Run the real DVC pipeline in throw-away copies of the repository.

The suite needs two clean runs of the whole pipeline (the same-machine reproducibility
contract compares their bytes): one shared by every test that reads a built pipeline, and a
second one that is SIGKILLed in a stage and recovered. Both start in background threads
before the first test (``conftest.py``), so they overlap each other and the rest of the suite;
a test that needs one waits for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from beir_fixtures import REPO

VENV_BIN = str(Path(sys.executable).parent)

# The names of dvc.yaml's stages and outputs the pipeline tests use, in one place: adapt them here
# when dvc.yaml's structure changes.
DATASET = "support"
RETRIEVERS = ["bm25", "lsa", "dense", "dense-ft-hard", "dense-ft-random", "dense-ft-temperature",
              "dense-ft-query", "fused-rrf", "fused-weighted"]  # metrics/<DATASET>/<name>.json
TRAIN_STAGES = {"train@hard", "train@random", "train@temperature", "train@query"}
# what a change of the rrf grid reruns: names reads fusion.methods whole (it checks the names, nothing follows it)
RRF_STAGES = {"names", "fuse@rrf", "evaluate-fused@rrf", "compare"}
# stages that run runs.py (some of them), and stages that do not
RUNS_READERS = {"retrieve@bm25", "retrieve-dense@dense", "mine@hard", "fuse@rrf", "evaluate@bm25", "train@hard", "compare"}
RUNS_NON_READERS = {"generate", "prepare", "encode@dense"}
COMPARED_PAIR = "dense vs dense-ft-hard"  # a pair of metrics/<DATASET>/compare.json
MINED_HARD = f"data/mined/{DATASET}/hard"
# The crash test kills this stage while its finished output waits to be renamed into place: a cheap
# stage with a folder output (mining-audit.json is written inside it, so the kill lands mid-folder).
KILLED_STAGE, KILLED_OUTPUT, KILLED_FILE = "mine@hard", MINED_HARD, "negatives.jsonl"
# The second clean run repeats every stage but training and what reads a fine-tuned model's run: train,
# retrieve-ft and evaluate-ft of every variant, fuse and evaluate-fused (fusion.dense is a fine-tuned run) and
# compare. Training is the suite's largest CPU cost (about 45-60 s of one core a variant). Instead, a train
# stage run twice on the toy dataset writes the same bytes, both sides and the query side
# (tests/training/test_stage.py), and the first run's fuse, evaluate-fused and compare stages, forced to run
# again, give the same bytes (test_stages_the_second_run_leaves_out_rerun_to_the_same_bytes).
NOT_REPEATED_KINDS = ("train", "retrieve-ft", "evaluate-ft", "fuse", "evaluate-fused", "compare")

# The first clean run is the suite's critical path (about 5 minutes of one core, and the pipeline
# tests wait for it); the second run and SciFact's corpus encode are read only by the last tests.
# They run at lower priorities, so that they use what the first run and the other tests leave idle.
# The second run (about 35 s of one core) starts when the first has ended: until then the one-thread tests
# and the first run keep both cores busy, and after it the pipeline tests (DVC commands one after another)
# and the threaded tests use 1.2 to 1.4 cores, so it takes what they leave (2-core Zen 3, 2026-12-07: both
# cores busy until about 380 s; in the main checkout the suite took 638 s before, 610 s and 630 s with the
# order of conftest.pytest_collection_modifyitems alone, 591 s with both; docs/lab-notes.md).
# Whatever ends last runs alone: the second run must keep one thread (its bytes are compared with the
# first run's), so it goes before the encode, which may use every core and so leaves none idle at the
# end (on one thread it ran alone for the suite's last 100 s with one of the 2 cores idle). The encode
# runs as one single-threaded Dask worker per core (`dense.shards`), not one process of several OpenMP
# threads: at the lowest priority a thread of those waited at every parallel region for its sibling,
# starved on a core the other tests held, and left the free core idle meanwhile.
LOW_PRIORITY = ["nice", "-n", "10"]
LOWEST_PRIORITY = ["nice", "-n", "19"]
ENCODE_SHARDS = os.cpu_count() or 1

_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()
_stopped = threading.Event()


def write_names(root: Path) -> None:
    """``retrieval-lab names`` in ``root``: dvc.yaml's names block from its params.yaml (what a user runs after
    adding, dropping or renaming a name, or choosing another dataset)."""
    from retrieval_lab import cli

    code = cli.main(["names", "--dvc-yaml", str(root / "dvc.yaml"), "--params", str(root / "params.yaml")])
    assert code == 0, f"retrieval-lab names failed in {root}"


_SESSION_ENVIRON: dict[str, str] | None = None


def freeze_environment() -> None:
    """Take the session's environment once (conftest, before any test): the pipeline runs that go on in background
    threads must not see what a test sets for itself meanwhile (``monkeypatch.setenv("OMP_NUM_THREADS", ...)`` read
    live gave one run of a pair another thread count, hence other float rounding and other bytes)."""
    global _SESSION_ENVIRON
    _SESSION_ENVIRON = dict(os.environ)


def env() -> dict:
    """The environment of every command the tests start: the session's, as :func:`freeze_environment` took it."""
    if _SESSION_ENVIRON is None:
        raise RuntimeError("pipeline_fixtures.freeze_environment() was not called (tests/conftest.py calls it)")
    e = dict(_SESSION_ENVIRON)
    e["PATH"] = VENV_BIN + os.pathsep + e.get("PATH", "")  # stages call `retrieval-lab`
    e["DVC_NO_ANALYTICS"] = "1"
    # one thread a run: the two clean runs go side by side with the other tests on 2 cores, and
    # oversubscribed OpenMP threads spin (CPU burnt, not work); both runs use the same count
    e.setdefault("OMP_NUM_THREADS", "1")
    e.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for key, value in {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                       "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}.items():
        e[key] = value
    return e


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and every process under it (a ``dvc repro``'s stage, a shell's command)."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    proc.kill()
    for child in tree:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()


def start(cmd: list[str] | str, cwd: Path, extra_env: dict | None = None, **kwargs) -> subprocess.Popen:
    """A process :func:`stop_all` kills, with what it started, if it still runs when the session ends.

    It stays in pytest's process group: interrupting pytest from the terminal interrupts it too.
    """
    with _running_lock:  # held while starting: stop_all() cannot miss a process started as it runs
        if _stopped.is_set():
            raise RuntimeError(f"the session is over: {cmd!r} not started")
        proc = subprocess.Popen(cmd, cwd=cwd, env={**env(), **(extra_env or {})}, **kwargs)
        _running.add(proc)
    return proc


def finish(proc: subprocess.Popen, timeout: float | None = None) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise
    finally:
        with _running_lock:
            _running.discard(proc)
    return out or "", err or ""


def stop_all() -> None:
    """Kill every process :func:`start` started that is still running, and start no other (the session ends)."""
    with _running_lock:
        _stopped.set()
        procs = list(_running)
    for proc in procs:
        _kill(proc)


def sh(cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1800,
       extra_env: dict | None = None) -> subprocess.CompletedProcess:
    proc = start(cmd, cwd, extra_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = finish(proc, timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-4000:]}\n{err[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


class Background:
    """``fn(*args)`` in a daemon thread; :meth:`result` waits, then returns its value or raises its error."""

    def __init__(self, fn, *args):
        self._value, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn, *args) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test that waits for it
            self._error = exc

    def wait(self) -> None:
        """Until ``fn`` has ended, whether it returned or raised."""
        self._thread.join()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def clone_working_tree(dest: Path) -> Path:
    """A fresh git repository holding the working tree's tracked and untracked-not-ignored files.

    The data symlink data/raw/scifact is relative; placing the copy where it resolves is not
    needed for the default (support) pipeline.
    """
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    dest.mkdir(parents=True)
    for name in filter(None, files):
        src = REPO / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    sh(["git", "init", "-q", "-b", "main"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "copy"], dest)
    return dest


def lock_hashes(repo: Path) -> dict[str, str]:
    """path -> md5 of every output recorded in dvc.lock."""
    import yaml

    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    return {out["path"]: out["md5"] for stage in lock["stages"].values() for out in stage.get("outs", [])}


@dataclass
class Build:
    """A clean ``dvc repro`` of the whole pipeline, with what it produced recorded when it ended."""

    repo: Path
    seconds: float
    log: str
    hashes: dict[str, str] = field(default_factory=dict)


def build_pipeline(dest: Path) -> Build:
    """Clone the working tree to ``dest`` and run ``dvc repro`` there."""
    repo = clone_working_tree(dest)
    started = time.perf_counter()
    proc = sh(["dvc", "repro"], repo)
    (repo / "repro.log").write_text(proc.stdout)
    return Build(repo, time.perf_counter() - started, proc.stdout, lock_hashes(repo))


@dataclass
class KilledStage:
    """What was on disk right after :data:`KILLED_STAGE` was SIGKILLed before renaming its output."""

    temporaries_at_kill: list[str]
    output_existed_at_kill: bool


def stage_graph(repo: Path) -> dict[str, tuple[str, list[str], list[str]]]:
    """stage name -> (cmd, dependency paths, output paths), with vars and foreach resolved by DVC itself."""
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        return {s.name: (s.cmd, [str(d.def_path) for d in s.deps], [str(o.def_path) for o in s.outs])
                for s in dvc_repo.index.stages}


def upstream_of(graph: dict[str, tuple[str, list[str], list[str]]], stage: str) -> list[str]:
    """The stages producing the outputs ``stage`` reads (``dvc repro`` of them makes the rest)."""
    producer = {out: name for name, (_, _, outs) in graph.items() for out in outs}
    return sorted({producer[o] for dep in graph[stage][1] for o in producer
                   if dep == o or dep.startswith(o.rstrip("/") + "/")})


def kill_stage_before_rename(repo: Path, cmd: str, output: str, written: str) -> KilledStage:
    """Run ``cmd`` with every write held before its rename (``HOLD_ENV``), SIGKILL it there, report what is left.

    ``written`` is a file inside the temporary of the folder ``output`` (``atomic.write_folder`` writes it
    as ``.NAME.tmp-retrieval-lab-XXXX/NAME/``, a box holding the output under its own name): once it
    exists the stage goes on to its first hold within two seconds and sleeps there. A layout this wait
    does not know fails here, at once, instead of waiting out the hold.
    """
    from retrieval_lab.core.atomic import HOLD_ENV, TMP_TAG

    target = repo / output
    pattern = f".{target.name}.tmp-*"
    inside = f".{target.name}.{TMP_TAG}*/{target.name}/{written}"
    proc = start(cmd, repo, {HOLD_ENV: "600"}, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not list(target.parent.glob(inside)):
            assert proc.poll() is None, f"{cmd} ended before writing its output"
            assert time.time() < deadline, f"no {inside} appeared: {sorted(map(str, target.parent.rglob('*')))}"
            time.sleep(0.2)
        time.sleep(2.0)  # the writer is now asleep before the rename
    finally:
        _kill(proc)
        finish(proc)
    return KilledStage(sorted(p.name for p in target.parent.glob(pattern)), target.exists())


@dataclass
class KilledRun:
    """A second clean run of the pipeline, killed inside :data:`KILLED_STAGE` and recovered by ``dvc repro``."""

    build: Build
    killed: KilledStage
    recovery_log: str
    temporaries_after: list[str]
    stages: list[str] = field(default_factory=list)  # the stages it made (:func:`repeated_stages`)


def repeated_stages(graph: dict) -> list[str]:
    """The stages the second clean run makes: all but those of the :data:`NOT_REPEATED_KINDS`."""
    return sorted(name for name in graph if name.partition("@")[0] not in NOT_REPEATED_KINDS)


def second_run_killed_and_recovered(repo: Path, graph: dict) -> KilledRun:
    """In a fresh clone ``repo``: build what :data:`KILLED_STAGE` reads, kill it before its rename,
    then ``dvc repro`` the :func:`repeated_stages`.

    ``graph`` is :func:`stage_graph` of the clone, read by the calling thread (DVC's Python API is
    kept out of the background threads). The recorded hashes are only those of
    the stages this run made (the clone's dvc.lock still holds the committed entries of the others).
    """
    started = time.perf_counter()
    stages = repeated_stages(graph)
    before = sh([*LOW_PRIORITY, "dvc", "repro", *upstream_of(graph, KILLED_STAGE)], repo).stdout
    killed = kill_stage_before_rename(repo, " ".join(LOW_PRIORITY) + " " + graph[KILLED_STAGE][0], KILLED_OUTPUT,
                                      KILLED_FILE)
    recovery = sh([*LOW_PRIORITY, "dvc", "repro", *stages], repo).stdout
    made = {out for name in stages for out in graph[name][2]}
    hashes = {path: md5 for path, md5 in lock_hashes(repo).items() if path in made}
    target = repo / KILLED_OUTPUT
    build = Build(repo, time.perf_counter() - started, before, hashes)  # log: before the kill
    return KilledRun(build, killed, recovery, sorted(p.name for p in target.parent.glob(f".{target.name}.tmp-*")),
                     stages)


def encode_in_background(dataset: Path, output: Path) -> Path:
    """``retrieval-lab encode`` of ``dataset`` with the base model into ``output``, at the lowest priority, one
    one-thread shard per core (bf16 where the CPU computes it natively, as ``dense.bf16: true`` does); returns
    ``output``."""
    from retrieval_lab.encoder import native_bf16

    precision = ["--set", "dense.bf16=true"] if native_bf16() else []
    shards = ["--set", f"dense.shards={ENCODE_SHARDS}"] if ENCODE_SHARDS > 1 else []
    sh([*LOWEST_PRIORITY, "retrieval-lab", "encode", "--dataset", str(dataset), "--output", str(output), *precision,
        *shards], REPO, extra_env={"OMP_NUM_THREADS": "1"})
    return output
