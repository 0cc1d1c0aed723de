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


def write_json(path: str | None, obj) -> None:
    if path:
        Path(path).write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
