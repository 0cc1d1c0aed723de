"""Latency beside quality: per-query wall times of a retriever, summarised with the machine they ran on.

``retrieve`` measures every run (built-in retrievers query by query on a timing pass, the user's own
ones on the calls that made the run) and writes :class:`Timing` to ``reports/<dataset>/<run>/timing.json``;
``evaluate`` copies its summary into the metrics JSON, ``compare`` and ``report`` show it in rows of
their own (never judged: wall times are not reproducible). A stage restored from DVC's cache reports
the timing measured when it ran: the file says when and where.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .core.errors import InputError

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


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """Where a timing was measured: enough to tell two machines apart, nothing that identifies a user."""
    return {"platform": platform.platform(), "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
            "python": platform.python_version()}


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
    """The summary of a ``timing.json``; a file that is not one is a one-line error naming it."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
        summary = obj["summary"]
        for key in SUMMARY:
            if not isinstance(summary[key], (int, float)):
                raise TypeError(f"'{key}' is not a number")
    except FileNotFoundError:
        raise InputError("no such file (the retrieve stage writes it with --timing)", str(path)) from None
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"not a retrieve timing.json ({exc})", str(path), field="summary") from None
    return summary


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


def same_machine(a: dict, b: dict) -> bool:
    return a.get("machine") == b.get("machine")


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
              "machines are marked: they compare machines as much as retrievers."), "",
             "| baseline | candidate | p50 ms | p95 ms | p99 ms | QPS | concurrency | same machine |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        a, b, d = r.baseline_summary, r.candidate_summary, difference(r.baseline_summary, r.candidate_summary)
        cells = [f"{a[k]:.2f} → {b[k]:.2f} ({d[k]:+.2f})" for k in ("p50_ms", "p95_ms", "p99_ms")]
        cells.append(f"{a['qps']:.1f} → {b['qps']:.1f} ({d['qps']:+.1f})")
        same = "yes" if same_machine(a, b) else "**no**"
        lines.append(f"| {r.baseline} | {r.candidate} | {' | '.join(cells)} | {a['concurrency']} → "
                     f"{b['concurrency']} | {same} |")
    return lines
