"""Gather: everything the report reads at the two revisions (git, the DVC cache, ``dvc metrics diff``).

Nothing here judges or formats; paths come from :class:`ReportPaths` (the command line).
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..comparison import ComparisonRow, per_query_measures, values_of
from ..core.data import Dataset, Qrels, load_dataset, read_qrels
from ..core.errors import InputError
from ..metrics import parse_measure
from ..report_files import COMPARE, DIAGNOSIS, PER_QUERY, RECALL_CURVE, TIMING
from ..runs import Run, read_run

WORKSPACE = None  # head = the working tree
LOSS_TSV = "plots/metrics/train/loss.tsv"  # inside a variant's dvclive folder (training/stage.py writes it)


@dataclass(frozen=True)
class ReportPaths:
    """Where the pipeline keeps what the report reads, relative to the repository (dvc.yaml's paths)."""

    reports: str  # <reports>/<retriever>/per_query.json, diagnosis.json, recall_curve.csv
    metrics: str  # <metrics>/<retriever>.json and compare.json
    dvclive: str  # <dvclive>/<variant>/plots/metrics/train/loss.tsv
    # for the comparison page (None: the page goes without): <runs>/<retriever>.trec at both revisions; the
    # prepared dataset (query and document texts) and the test judgments, from the working tree
    runs: str | None = None
    prepared: str | None = None
    qrels: str | None = None

    def __post_init__(self):
        # one spelling per folder: `metrics/support/` or `./metrics/support` must match dvc's
        # `metrics/support/bm25.json`, or a changed metrics file goes unseen (issue 42: the gate passed)
        for name in ("reports", "metrics", "dvclive", "runs"):
            if getattr(self, name) is not None:  # runs: read at both revisions too
                object.__setattr__(self, name, normal(getattr(self, name), f"--{name}-root"))

    @classmethod
    def defaults(cls, dataset: str) -> ReportPaths:
        """dvc.yaml's folders for ``dataset``."""
        return cls(f"reports/{dataset}", f"metrics/{dataset}", f"dvclive/{dataset}", f"runs/{dataset}",
                   f"data/prepared/{dataset}", f"data/heldout/{dataset}/qrels/test.tsv")

    def report_file(self, retriever: str, name: str) -> str:
        return f"{self.reports}/{retriever}/{name}"

    def metrics_file(self, retriever: str) -> str:
        return f"{self.metrics}/{retriever}.json"


def normal(path: str, option: str | None = None) -> str:
    """``path`` relative to the repository in one spelling (no ``./``, ``//`` or trailing ``/``)."""
    text = posixpath.normpath(str(path).replace("\\", "/"))
    if text.startswith(("/", "../")) or text == "..":
        raise InputError("must be a folder inside the repository (relative, no '..')", str(path), field=option)
    return text


def read_at(path: str, rev: str | None, repo: str = ".") -> str | None:
    """Text of ``path`` at git revision ``rev`` (DVC outputs come from the cache/remote); None if absent."""
    if rev is WORKSPACE:
        p = Path(repo) / path
        return p.read_text(encoding="utf-8") if p.exists() else None
    import dvc.api

    try:
        return dvc.api.read(path, repo=repo, rev=rev, mode="r", encoding="utf-8")
    except Exception:  # noqa: BLE001  absent at that revision, or not pushed: the report says "missing"
        return None


def check_revision(rev: str, repo: str, option: str) -> None:
    """Refuse a revision git does not know, before anything is read at it."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                          cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InputError(f"no such git revision {rev!r} in {repo}", field=option)


def metrics_diff(base: str, head: str | None, repo: str = ".") -> dict:
    """``dvc metrics diff --json`` between the two revisions (head None: the workspace)."""
    cmd = [sys.executable, "-m", "dvc", "metrics", "diff", "--json", "--all", base] + ([head] if head else [])
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InputError(f"dvc metrics diff {base} {head or 'workspace'} failed: {first}")
    try:
        diff = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError as exc:
        raise InputError(f"dvc metrics diff {base} {head or 'workspace'} printed no JSON ({exc.msg})") from None
    return {normal(path): fields for path, fields in diff.items()}


def is_measure_field(name: str) -> bool:
    """A metrics field that is a measure (``nDCG@10``, ``val.R@100``) or a loss; the rest is bookkeeping."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "loss" or leaf.endswith("_loss"):
        return True
    try:
        parse_measure(leaf)
    except InputError:
        return False
    return True


def changed_fields(diff: dict) -> tuple[list[tuple], list[tuple]]:
    """(measures, bookkeeping): (file, field, old, new, change) for every value that differs.

    ``compare.json`` files are left out: their statistics are the compare stage's own report.
    """
    measures, bookkeeping = [], []
    for path in sorted(diff):
        if Path(path).name == COMPARE:
            continue
        for name, v in sorted(diff[path].items()):
            path = normal(path)
            old, new = v.get("old"), v.get("new")
            if old == new:
                continue
            (measures if is_measure_field(name) else bookkeeping).append((path, name, old, new, v.get("diff")))
    return measures, bookkeeping


@dataclass
class Retriever:
    name: str
    sources: tuple[str, str]  # where base and head came from, for error messages
    base: dict | None  # per_query.json "queries" at each revision; None when absent
    head: dict | None
    stats: dict[str, ComparisonRow] = field(default_factory=dict)  # measure -> comparison (judge fills it)

    @property
    def status(self) -> str:
        if self.base is None or self.head is None:
            return "missing at base" if self.base is None else "missing at head"
        return "unchanged" if self.base == self.head else "changed"

    def values(self, measure: str, which: str) -> dict[str, float]:
        entries, source = (self.base, self.sources[0]) if which == "base" else (self.head, self.sources[1])
        return values_of(entries, measure, source)


Series = tuple[list[int], list[float]]


@dataclass
class Gathered:
    """What the two revisions hold, read once."""

    base: str
    head: str | None
    paths: ReportPaths
    diff: dict  # dvc metrics diff
    measures_changed: list[tuple]
    bookkeeping: list[tuple]
    retrievers: list[Retriever]
    diagnoses: dict[str, dict | None] = field(default_factory=dict)  # changed retriever -> head's diagnosis
    recall: dict[str, tuple[Series | None, Series | None]] = field(default_factory=dict)  # (base, head)
    losses: dict[str, tuple[Series | None, Series | None]] = field(default_factory=dict)  # variant -> (base, head)
    rankings: dict[str, tuple[Run | None, Run | None]] = field(default_factory=dict)  # changed retriever's runs
    dataset: Dataset | None = None  # texts for the page (the working tree's prepared dataset), if present
    qrels: Qrels | None = None  # the test judgments (working tree), if present
    timings: dict[str, tuple[dict | None, dict | None]] = field(default_factory=dict)  # retriever -> latency summaries

    @property
    def head_name(self) -> str:
        return self.head or "workspace"

    @property
    def changed(self) -> list[Retriever]:
        return [r for r in self.retrievers if r.status == "changed"]


def _tracked(paths: ReportPaths, rev: str | None, repo: str) -> set[str]:
    """Retrievers whose per_query.json the revision's dvc.lock tracks (and, in the workspace, those present)."""
    import yaml

    found = set()
    if rev is WORKSPACE:
        found = {p.parent.name for p in (Path(repo) / paths.reports).glob(f"*/{PER_QUERY}")}
    lock = yaml.safe_load(read_at("dvc.lock", rev, repo) or "{}") or {}
    return found | {Path(o["path"]).parent.name for s in lock.get("stages", {}).values()
                    for o in s.get("outs", []) if o["path"].startswith(f"{paths.reports}/")
                    and o["path"].endswith(PER_QUERY)}


def _discover(paths: ReportPaths, base: str, head: str | None, repo: str, measures_changed: list[tuple]) -> list[str]:
    """Every retriever either revision has: a retriever on one side only must be seen (and not judged)."""
    in_metrics = {Path(path).stem for path, *_ in measures_changed
                  if normal(Path(path).parent.as_posix()) == paths.metrics and Path(path).name != COMPARE}
    return sorted(_tracked(paths, base, repo) | _tracked(paths, head, repo) | in_metrics)


def _curve(text: str | None) -> Series | None:
    if not text:
        return None
    rows = list(csv.DictReader(io.StringIO(text)))
    return [int(r["k"]) for r in rows], [float(r["recall"]) for r in rows]


def _loss(text: str | None) -> Series | None:
    if not text:
        return None
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    key = next((k for k in rows[0] if k.endswith("loss")), None) if rows else None
    return ([int(r["step"]) for r in rows], [float(r[key]) for r in rows]) if key else None


def _timing(text: str | None) -> dict | None:
    """A timing.json's latency summary; None when absent or not one (latency is shown, never gated)."""
    if not text:
        return None
    try:
        summary = json.loads(text)["summary"]
        return summary if all(isinstance(summary.get(k), (int, float)) for k in ("p50_ms", "p95_ms", "qps")) else None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def gather(base: str, head: str | None, paths: ReportPaths, variants: list[str], repo: str = ".",
           retrievers: list[str] | None = None) -> Gathered:
    """Read both revisions: the metrics diff, every retriever's per-query results, and for the changed
    ones the head's diagnosis and both recall curves; each training variant's loss curve."""
    check_revision(base, repo, "--base")
    if head is not WORKSPACE:
        check_revision(head, repo, "--head")
    diff = metrics_diff(base, head, repo)
    measures_changed, bookkeeping = changed_fields(diff)
    names = retrievers if retrievers is not None else _discover(paths, base, head, repo, measures_changed)
    found = []
    for name in names:
        path = paths.report_file(name, PER_QUERY)
        old, new = read_at(path, base, repo), read_at(path, head, repo)
        sources = (f"{base}:{path}", f"{head or 'workspace'}:{path}")
        found.append(Retriever(name, sources, None if old is None else per_query_measures(old, sources[0]),
                               None if new is None else per_query_measures(new, sources[1])))
    g = Gathered(base, head, paths, diff, measures_changed, bookkeeping, found)
    for r in g.changed:
        text = read_at(paths.report_file(r.name, DIAGNOSIS), head, repo)
        g.diagnoses[r.name] = json.loads(text) if text else None
        curve = paths.report_file(r.name, RECALL_CURVE)
        g.recall[r.name] = (_curve(read_at(curve, base, repo)), _curve(read_at(curve, head, repo)))
    for r in g.retrievers:  # latency moves without the results moving: read for every retriever
        path = paths.report_file(r.name, TIMING)
        g.timings[r.name] = (_timing(read_at(path, base, repo)), _timing(read_at(path, head, repo)))
    for variant in variants:
        path = f"{paths.dvclive}/{variant}/{LOSS_TSV}"
        g.losses[variant] = (_loss(read_at(path, base, repo)), _loss(read_at(path, head, repo)))
    _page_inputs(g, repo)
    return g


def _run(text: str | None, source: str) -> Run | None:
    if text is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:  # read_run checks every line of a file
        path = Path(tmp) / Path(source).name
        path.write_text(text, encoding="utf-8")
        try:
            return read_run(path)
        except InputError as exc:
            raise InputError(str(exc).replace(str(path), source)) from None


def _page_inputs(g: Gathered, repo: str) -> None:
    """The comparison page's rankings (each changed retriever's run at both revisions) and, from the
    working tree, the texts and judgments."""
    paths = g.paths
    if paths.runs is not None:
        for r in g.changed:
            path = f"{paths.runs}/{r.name}.trec"
            g.rankings[r.name] = tuple(_run(read_at(path, rev, repo), f"{rev or 'workspace'}:{path}")
                                       for rev in (g.base, g.head))
    prepared = Path(repo) / paths.prepared if paths.prepared else None
    if prepared is not None and (prepared / "queries.jsonl").exists():
        g.dataset = load_dataset(prepared, [])
        qrels = Path(repo) / paths.qrels if paths.qrels else None
        if qrels is not None and qrels.exists():
            g.qrels = read_qrels(qrels, g.dataset.queries, g.dataset.corpus)
