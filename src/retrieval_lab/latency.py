"""Latency beside quality: per-query wall times of a retriever, summarised with the machine they ran on.

``retrieve --timing FILE`` measures a run (built-in retrievers query by query on a timing pass, the user's
own ones on the calls that made the run) and writes :class:`Timing` there. The pipeline writes
``latency/<dataset>/<run>.json``, a folder neither git nor DVC tracks: a wall time differs on every run,
and DVC records the hash of every declared output in dvc.lock, so no tracked file may hold one. Latency
is shown only when asked: ``retrieval-lab latency DIR`` (:func:`latency_text`), ``compare --timing-root``
and ``report --timing-root`` read ``DIR/<run>.json``; ``evaluate --timing`` copies a summary into a
metrics JSON of the user's own. Never judged, never gated.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .core.errors import InputError
from .core.parse import json_loads
from .machine import cpu, describe, same_cpu

PERCENTILES = (50, 95, 99)
SUMMARY = ("queries", "concurrency", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "qps")  # numbers of a summary


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile by linear interpolation between closest ranks (numpy's default rule)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def machine() -> dict:
    """Where a timing was measured: enough to tell two machines apart (the CPU's make, not only its maskable
    name: machine.py), nothing that identifies a user."""
    return {"platform": platform.platform(), **cpu(), "cpu_count": os.cpu_count(), "python": platform.python_version()}


@dataclass(frozen=True)
class Timing:
    """Per-query wall seconds of one run, measured at ``concurrency`` calls in flight over ``wall_s``."""

    retriever: str
    scope: str  # what a query's time covers (e.g. "one call to the user's function")
    concurrency: int
    seconds: dict[str, float]  # query id -> wall seconds (answered queries only)
    wall_s: float  # the whole measured pass, first call to last answer
    machine: dict = field(default_factory=machine)
    measured_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    calls: dict | None = None  # the user's retriever: failures, unknown and duplicate ids (external.py)

    def summary(self) -> dict:
        """The numbers ``evaluate`` carries into the metrics JSON, with where they were measured."""
        ms = [s * 1000 for s in self.seconds.values()]
        out = {"queries": len(ms), "concurrency": self.concurrency}
        out.update({f"p{q}_ms": percentile(ms, q) for q in PERCENTILES})
        out["mean_ms"] = sum(ms) / len(ms) if ms else math.nan
        out["qps"] = len(ms) / self.wall_s if self.wall_s > 0 else math.nan
        return {**out, "scope": self.scope, "machine": self.machine, "measured_at": self.measured_at}

    def to_json(self) -> dict:
        out = {"retriever": self.retriever, "summary": self.summary(), "wall_s": self.wall_s,
               "seconds": self.seconds}
        if self.calls is not None:
            out["calls"] = self.calls
        return out

    @classmethod
    def from_json(cls, obj: dict) -> Timing:
        s = obj["summary"]
        return cls(obj["retriever"], s["scope"], s["concurrency"], obj["seconds"], obj["wall_s"], s["machine"],
                   s["measured_at"], obj.get("calls"))


def read_summary(path: str | Path) -> dict:
    """The summary of a file ``retrieve --timing`` wrote; a file that is not one is a one-line error naming it."""
    try:
        obj = json_loads(Path(path).read_text(encoding="utf-8"), str(path))
        summary = obj["summary"]
        for key in SUMMARY:
            if not isinstance(summary[key], (int, float)):
                raise TypeError(f"'{key}' is not a number")
    except FileNotFoundError:
        raise InputError("no such file (retrieve --timing writes it)", str(path)) from None
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"not a retrieve --timing file ({exc})", str(path), field="summary") from None
    return summary


def read_timing(path: str | Path) -> Timing:
    """A file ``retrieve --timing`` wrote; one that is not one is a one-line error naming it."""
    read_summary(path)  # the summary's numbers checked, with its error
    try:
        obj = json_loads(Path(path).read_text(encoding="utf-8"), str(path))
        timing = Timing.from_json(obj)
        if not isinstance(timing.seconds, dict) or not isinstance(timing.machine, dict):
            raise TypeError("'seconds' and 'machine' must be objects")
        if not all(isinstance(v, (int, float)) for v in timing.seconds.values()):
            raise TypeError("'seconds' must map query ids to numbers")
    except (KeyError, TypeError) as exc:
        raise InputError(f"not a retrieve --timing file ({exc})", str(path)) from None
    return timing


def read_folder(folder: str | Path, runs: Sequence[str] | None = None) -> dict[str, Timing]:
    """run name -> :class:`Timing` of ``<folder>/<run>.json``: the ``runs`` named, else every file there.

    A run named without its file, a missing folder or one without any file is a one-line error: there is
    nothing to show, and an empty table would pass for one.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputError("no such folder (retrieve --timing FOLDER/<run>.json writes into it)", str(root))
    names = list(runs) if runs else sorted(p.stem for p in root.glob("*.json"))
    if not names:
        raise InputError("holds no <run>.json (retrieve --timing writes them)", str(root))
    missing = [n for n in names if not (root / f"{n}.json").is_file()]
    if missing:
        raise InputError(f"no timing for {', '.join(missing)} (expected {missing[0]}.json)", str(root))
    return {name: read_timing(root / f"{name}.json") for name in names}


def time_each(search_one: Callable[[str], object], qids: Iterable[str]) -> tuple[dict[str, float], float]:
    """Wall seconds of ``search_one(qid)`` for each query, one after another; and the whole pass's."""
    seconds = {}
    start = time.perf_counter()
    for qid in qids:
        t = time.perf_counter()
        search_one(qid)
        seconds[qid] = time.perf_counter() - t
    return seconds, time.perf_counter() - start


def difference(baseline: dict, candidate: dict) -> dict:
    """candidate - baseline for each latency number (a positive p95 difference: the candidate is slower)."""
    return {key: candidate[key] - baseline[key] for key in SUMMARY[2:]}


def same_machine(a: dict, b: dict) -> bool | None:
    """Whether two summaries were measured on one machine; None where either machine record lacks the CPU's
    make (a timing made before it was kept): a masked model name such as "AMD EPYC" cannot say."""
    ma, mb = a.get("machine") or {}, b.get("machine") or {}
    return None if same_cpu(ma, mb) is None else ma == mb


@dataclass(frozen=True)
class LatencyRow:
    """Two retrievers' latency side by side (or one retriever at two revisions); shown, never judged."""

    baseline: str
    candidate: str
    baseline_summary: dict
    candidate_summary: dict

    def to_json(self) -> dict:
        pick = lambda s: {k: s[k] for k in SUMMARY}
        return {"baseline": pick(self.baseline_summary), "candidate": pick(self.candidate_summary),
                "difference": difference(self.baseline_summary, self.candidate_summary),
                "same_machine": same_machine(self.baseline_summary, self.candidate_summary)}


def markdown_rows(rows: list[LatencyRow], what: str = "baseline → candidate") -> list[str]:
    """The latency table of ``compare`` and ``report``: p50/p95/p99 and QPS, each with its difference."""
    if not rows:
        return []
    lines = ["", f"## Latency ({what}; measured when each run was made, not judged)", "",
             ("Per-query wall time in ms and queries per second at each run's concurrency; difference = "
              "candidate - baseline (a positive ms difference: the candidate is slower). Times from two "
              "machines are marked: they compare machines as much as retrievers; unknown: a timing that does not "
              "record its CPU's make (vendor, family, model, instruction sets), made before it was kept."), "",
             "| baseline | candidate | p50 ms | p95 ms | p99 ms | QPS | concurrency | same machine |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        a, b, d = r.baseline_summary, r.candidate_summary, difference(r.baseline_summary, r.candidate_summary)
        cells = [f"{a[k]:.2f} → {b[k]:.2f} ({d[k]:+.2f})" for k in ("p50_ms", "p95_ms", "p99_ms")]
        cells.append(f"{a['qps']:.1f} → {b['qps']:.1f} ({d['qps']:+.1f})")
        same = {True: "yes", False: "**no**", None: "unknown"}[same_machine(a, b)]
        lines.append(f"| {r.baseline} | {r.candidate} | {' | '.join(cells)} | {a['concurrency']} → "
                     f"{b['concurrency']} | {same} |")
    return lines


def _failed(timing: Timing) -> str:
    calls = timing.calls
    return f"{calls['failed']} of {calls['queries']}" if calls else "–"


def table_rows(timings: Mapping[str, Timing]) -> list[str]:
    """One markdown row per run: its p50/p95/p99 and QPS, the concurrency, what a query's time covers, the
    failed calls (your own retrievers), the machine and when."""
    lines = [("| run | queries | concurrency | p50 ms | p95 ms | p99 ms | QPS | failed | one query's time | "
              "machine | measured at |"), "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    for name, t in timings.items():
        s = t.summary()
        where = f"{describe(t.machine)}, {t.machine.get('cpu_count')} CPUs"
        lines.append(f"| {name} | {s['queries']} | {s['concurrency']} | {s['p50_ms']:.2f} | {s['p95_ms']:.2f} | "
                     f"{s['p99_ms']:.2f} | {s['qps']:.1f} | {_failed(t)} | {s['scope']} | {where} | "
                     f"{t.measured_at} |")
    return lines


def latency_text(folder: str | Path, runs: Sequence[str] | None = None, base: str | Path | None = None) -> str:
    """What ``retrieval-lab latency`` prints: each run's latency in ``folder``; with ``base`` (another such
    folder, e.g. a copy made on the main branch) each run at base -> head with head - base.

    Runs in one folder only are named; none in both is an error (nothing to compare).
    """
    head = read_folder(folder, runs)
    lines = [f"# Latency: {folder} (measured when each run was made, never judged)", ""] + table_rows(head)
    if base is None:
        return "\n".join(lines) + "\n"
    names = [n for n in head if (Path(base) / f"{n}.json").is_file()]
    if not names:
        raise InputError(f"holds none of the runs of {folder} ({', '.join(head)}): nothing to compare",
                         str(base), field="--base")
    old = read_folder(base, names)
    rows = [LatencyRow(f"{n} @ {base}", f"{n} @ {folder}", old[n].summary(), head[n].summary()) for n in names]
    lines += markdown_rows(rows, "base → head")
    alone = [n for n in head if n not in old]
    if alone:
        lines += ["", f"Not at base ({base}): {', '.join(alone)}."]
    return "\n".join(lines) + "\n"
