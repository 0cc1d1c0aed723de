"""Shared by the bench_* scripts: run each contender in a fresh process, time it, read its peak memory."""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

SCIFACT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "scifact"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # kB -> MB
    return float("nan")


def reset_peak() -> float:
    """Reset the peak-RSS counter where the kernel allows it; return the current RSS (MB)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # the peak then also covers the setup before the timed work
    return _status_mb("VmRSS")


def peak_mb() -> float:
    return _status_mb("VmHWM")


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def host_speed(additions: int = 20_000_000, matmul_size: int = 1024) -> dict:
    """How fast this host runs now, beside a long bench's rows: the CPU seconds of ``additions`` additions in a
    pure-Python loop (process time: a share of a busy core does not count) and the best GFLOP/s of five float32
    ``matmul_size``-square matmuls on numpy's threads. One machine ran the same training step 1.56x slower in one
    hour than in another (docs/lab-notes.md): a wall time compares with another only where these were close."""
    import numpy as np

    cpu = time.process_time()
    total = 0
    for i in range(additions):
        total += i
    loop = time.process_time() - cpu
    a = np.random.default_rng(0).standard_normal((matmul_size, matmul_size), dtype=np.float32)
    best = min(timed(lambda: a @ a)[0] for _ in range(5))
    return {"additions": additions, "loop_cpu_s": round(loop, 6),
            "matmul_gflops": round(2 * matmul_size ** 3 / best / 1e9, 1)}


def timed_cpu(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of the whole process: every thread's, result)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


def isolated(fn, *args, cpu: int | None = None):
    """Run ``fn(*args)`` in a fresh interpreter so imports, caches and peak memory are its own; with ``cpu``, that
    process and every thread it starts run on that one CPU only (a peer that feeds a worker thread from the
    calling one cannot spread over two cores where ours has one)."""
    initializer, initargs = (os.sched_setaffinity, (0, {cpu})) if cpu is not None else (None, ())
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=initializer,
                             initargs=initargs) as pool:
        return pool.submit(fn, *args).result()


def compete(contenders: list, args: tuple, rounds: int, cpu: int | None = None) -> list[dict]:
    """Run each contender once per round, each in a fresh process (on CPU ``cpu`` only, if given); keep each
    one's fastest round.

    The order alternates between rounds so that drifting load from other jobs on the
    machine (shared cores) falls on every contender alike.
    """
    best: dict[int, dict] = {}
    times: dict[int, list[float]] = {i: [] for i in range(len(contenders))}
    for round_ in range(rounds):
        order = list(enumerate(contenders))
        for i, fn in order if round_ % 2 == 0 else order[::-1]:
            row = isolated(fn, *args, cpu=cpu)
            times[i].append(round(row["seconds"], 3))
            if i not in best or row["seconds"] < best[i]["seconds"]:
                best[i] = row
    return [{**best[i], "rounds": times[i]} for i in range(len(contenders))]


@contextmanager
def chromium(playwright, executable: str):
    """The system's Chromium, headless, launched by ``playwright`` (a started ``sync_playwright()``) and closed
    on exit. Chromium keeps its crash reports under $XDG_CONFIG_HOME and dconf its settings under
    $XDG_CACHE_HOME, both in the home folder by default: here a folder of its own, removed with the browser."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as own:
        env = {**os.environ, "XDG_CONFIG_HOME": f"{own}/config", "XDG_CACHE_HOME": f"{own}/cache"}
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, env=env)
        try:
            yield browser
        finally:
            browser.close()


def markdown(rows: list[dict], columns: list[str]) -> str:
    def cell(value):
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- a script's --json
# The rule of the commands (a command replaces only what it wrote, never an input), for the scripts' --json: a
# script's result is a JSON object holding the top-level keys it declares, and its --json replaces only such an
# object (what an earlier run of the same script wrote), an empty file or nothing. Checked before any work, for
# a bench may run for hours: an input named on its command line, a file inside a BEIR folder or inside a folder
# it reads, a run, qrels, a note or another script's result is refused in one line, and nothing is written.


def _given_paths(args) -> list[Path]:
    """Every existing path among the parsed arguments (strings and lists of strings): what the script reads."""
    found = []
    for name, value in vars(args).items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if name != "json" and isinstance(item, (str, os.PathLike)) and str(item) and os.path.exists(item):
                found.append(Path(item))
    return found


def _top_keys(path: Path) -> set[str] | None:
    """The top-level keys of the JSON object in ``path``; None when it holds anything else."""
    try:
        if path.stat().st_size > 1 << 26:
            return None  # no script writes a result of 64 MiB
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return set(data) if isinstance(data, dict) else None


def _refuse_unless_own(path: str, keys: tuple[str, ...], script: str) -> None:
    """SystemExit unless ``path`` holds nothing or a result of ``script`` (a JSON object holding ``keys``)."""
    from retrieval_lab.core.kinds import describe, recognised

    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return  # nothing there (folders, devices and links: check_replaceable)
    found = _top_keys(target)
    if found is not None and set(keys) <= found:
        return
    if recognised(target) is not None or found is None:
        what = describe(target) if recognised(target) is not None else "a file that is not a JSON object"
    else:
        what = "a JSON object without " + ", ".join(k for k in keys if k not in found)
    raise SystemExit(f"{path}: --json is {what}; {script} replaces only its own results (a JSON object with "
                     f"{', '.join(keys)}); choose another --json")


class JsonResult(NamedTuple):
    """A script's --json: ``script`` writes a JSON object holding ``keys``, by which it knows its own. (A
    NamedTuple, not a dataclass: tests/browser.py loads this module without registering it in sys.modules,
    where a dataclass looks its module up.)"""

    script: str
    keys: tuple[str, ...]

    def check(self, args) -> None:
        """Refuse (SystemExit, one line, nothing written) ``args.json`` where it would replace anything but a
        result of this script or an input named among ``args``, or lie inside a BEIR folder or a folder
        ``args`` names."""
        path = getattr(args, "json", None)
        if not path:
            return
        from retrieval_lab.core.atomic import check_replaceable
        from retrieval_lab.core.errors import InputError
        from retrieval_lab.core.kinds import beir_folder

        target = Path(os.path.realpath(path))
        for given in _given_paths(args):
            reached = Path(os.path.realpath(given))
            if reached == target:
                raise SystemExit(f"{path}: --json is {given}, which {self.script} reads; choose another --json")
            if reached.is_dir() and reached in target.parents:
                raise SystemExit(f"{path}: --json lies inside {given}, which {self.script} reads; choose another "
                                 "--json")
        for parent in target.parents:
            if beir_folder(parent):
                raise SystemExit(f"{path}: --json lies inside the BEIR folder {parent}; {self.script} never "
                                 "writes into a dataset")
        try:
            check_replaceable(path, False, "--json")
        except InputError as exc:
            raise SystemExit(str(exc)) from None
        _refuse_unless_own(path, self.keys, self.script)

    def write(self, path: str | None, obj: dict) -> None:
        """``obj`` at ``path`` (None: nowhere), atomically, after :meth:`check`'s test of what is there again
        (something may have appeared while the script ran)."""
        if path:
            from retrieval_lab.core.atomic import write_text

            missing = [k for k in self.keys if k not in obj]
            assert not missing, f"{self.script}'s result lacks its own keys {missing}"
            _refuse_unless_own(path, self.keys, self.script)
            write_text(path, json.dumps(obj, indent=2) + "\n")
