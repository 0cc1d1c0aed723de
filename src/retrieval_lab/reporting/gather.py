"""Gather: everything the report reads at the two revisions.

A revision is read as git and DVC hold it: a file git tracks at that revision, else an output its
``dvc.lock`` records (``dvc.api``: the DVC cache, or the remote); the working tree when head is the
workspace. Nothing more is needed in a repository: per-query results and metrics files committed to
git on two branches are enough, with no ``dvc.yaml`` and no metrics declaration.

Each root (reports, metrics, runs) is resolved once against the working tree the way DVC and git name
the paths under it (a link followed to its target, each name spelled as on disk), and every read is
counted, so a root that matches nothing at a revision is a blind spot the gate reports (it fails
closed) instead of a quiet "no change". Nothing here judges or formats.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import posixpath
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..comparison import ComparisonRow, per_query_measures, values_of
from ..core.atomic import REPLACING, check_whole
from ..core.data import Dataset, Qrels, load_dataset, read_qrels
from ..core.errors import InputError
from ..core.parse import json_loads
from ..metrics import parse_measure
from ..report_files import COMPARE, DIAGNOSIS, PER_QUERY, RECALL_CURVE
from ..runs import Run, read_run

WORKSPACE = None  # head = the working tree
LOSS_TSV = "plots/metrics/train/loss.tsv"  # inside a variant's dvclive folder (training/stage.py writes it)
TRAINING_METRICS = "metrics.json"  # inside a variant's dvclive folder: shown in the metrics diff, never gated
LATENCY = "latency"  # a metrics file's latency summary: wall times, shown apart and never gated
_LINK_HOPS = 8


@dataclass(frozen=True)
class ReportPaths:
    """Where the report reads, relative to the repository: ``<reports>/<retriever>/per_query.json`` (and
    diagnosis.json, recall_curve.csv), ``<metrics>/<retriever>.json``,
    ``<dvclive>/<variant>/...``; for the comparison page ``<runs>/<retriever>.trec`` at both revisions,
    and from the working tree a BEIR folder with the texts (``prepared``) and the judgments (``qrels``);
    latency (``--timing-root``, shown, never gated) from ``<timing>/<retriever>.json`` at both revisions.
    None: the report goes without."""

    reports: str
    metrics: str
    dvclive: str | None = None
    runs: str | None = None
    prepared: str | None = None
    qrels: str | None = None
    timing: str | None = None

    def __post_init__(self):
        # one spelling per folder: `metrics/support/` or `./metrics/support` names metrics/support/bm25.json
        for name in ("reports", "metrics", "dvclive", "runs", "timing"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, normal(getattr(self, name), f"--{name}-root"))

    @classmethod
    def defaults(cls, dataset: str) -> ReportPaths:
        """dvc.yaml's folders for ``dataset``."""
        return cls(f"reports/{dataset}", f"metrics/{dataset}", f"dvclive/{dataset}", f"runs/{dataset}",
                   f"data/prepared/{dataset}", f"data/heldout/{dataset}/qrels/test.tsv")

    def resolved(self, repo: str) -> ReportPaths:
        """The roots as the repository names them (:func:`resolve_root`)."""
        roots = {name: resolve_root(repo, getattr(self, name), f"--{name}-root")
                 for name in ("reports", "metrics", "dvclive", "runs") if getattr(self, name) is not None}
        return ReportPaths(**{**self.__dict__, **roots})

    def report_file(self, retriever: str, name: str) -> str:
        return f"{self.reports}/{retriever}/{name}"

    def metrics_file(self, retriever: str) -> str:
        return f"{self.metrics}/{retriever}.json"


def normal(path: str, option: str | None = None) -> str:
    """``path`` relative to the repository in one spelling (no ``./``, ``//`` or trailing ``/``); an absolute
    path is kept as one (:func:`resolve_root` makes it relative, or refuses it outside the repository)."""
    text = posixpath.normpath(str(path).replace("\\", "/"))
    if text.startswith("../") or text == "..":
        raise InputError("must be a folder inside the repository (no '..')", str(path), field=option)
    return text


def resolve_root(repo: str, root: str, option: str | None = None) -> str:
    """``root`` as git and DVC name the paths under it: each part spelled as the working tree has it and
    a link replaced by its target, so ``mlink`` (a link to ``metrics/toy``) reads ``metrics/toy/bm25.json``
    and a case-insensitive file system's ``METRICS/toy`` reads ``metrics/toy`` (git, DVC and a
    case-sensitive file system see no ``METRICS``). A root the working tree lacks stays as given: it
    is read at the revisions, where it may match nothing (the gate then cannot judge)."""
    text = normal(root, option)
    top = Path(os.path.realpath(repo))
    if text.startswith("/"):  # absolute: the same folder as the path relative to the repository, or refused
        absolute = Path(os.path.realpath(text))
        if not absolute.is_relative_to(top):
            raise InputError(f"is not inside the repository {top}", str(root), field=option)
        text = absolute.relative_to(top).as_posix() if absolute != top else "."
    current = top
    for part in ([] if text == "." else text.split("/")):
        try:
            names = os.listdir(current)
        except OSError:
            return text
        if part not in names:
            folded = [n for n in names if n.casefold() == part.casefold()]
            if len(folded) != 1 or not (current / part).exists():  # exists: the file system itself matched
                return text
            part = folded[0]
        current = Path(os.path.realpath(current / part))
        if not current.is_relative_to(top):
            raise InputError(f"leads out of the repository (to {current})", str(root), field=option)
    return normal(current.relative_to(top).as_posix()) if current != top else "."


# ----------------------------------------------------------------------------- one revision


def _git(repo: str, *args: str, text: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=text, check=False)


def check_revision(rev: str, repo: str, option: str) -> None:
    """Refuse a revision git does not know, before anything is read at it."""
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0:
        raise InputError(f"no such git revision {rev!r} in {repo}", field=option)


class Revision:
    """One revision of the repository: its git tree first, then the DVC outputs its dvc.lock records
    (read through ``dvc.api``); the working tree when ``rev`` is :data:`WORKSPACE`."""

    def __init__(self, repo: str, rev: str | None):
        self.repo, self.rev = repo, rev
        self._dvc_outs: set[str] | None = None
        self._dvc_fs = None  # one DVC file system per revision: opening the repository is most of a read's cost

    @property
    def label(self) -> str:
        return self.rev or "workspace"

    def source(self, path: str) -> str:
        return f"{self.label}:{path}"

    def _tree(self, path: str, recursive: bool) -> dict[str, tuple[str, str]]:
        """path -> (mode, object) of what git tracks at ``path`` (a file, or every file under a folder)."""
        args = ["ls-tree", "-z", *(["-r"] if recursive else []), "--end-of-options", self.rev, "--", path]
        done = _git(self.repo, *args)
        if done.returncode != 0:
            return {}
        out = {}
        for entry in filter(None, done.stdout.split("\0")):
            meta, name = entry.split("\t", 1)
            mode, kind, obj = meta.split()
            if kind == "blob":
                out[name] = (mode, obj)
        return out

    def dvc_outs(self) -> set[str]:
        """The file outputs dvc.lock records at this revision (none in a repository without DVC)."""
        if self._dvc_outs is None:
            import yaml

            self._dvc_outs = set()
            text = self._git_read("dvc.lock") if (Path(self.repo) / ".dvc").is_dir() else None
            try:
                lock = yaml.safe_load(text or "") or {}
                for stage in (lock.get("stages") or {}).values():
                    self._dvc_outs |= {normal(o["path"]) for o in stage.get("outs") or [] if "path" in o}
            except (yaml.YAMLError, AttributeError, TypeError, KeyError, ValueError, InputError):
                pass  # an unreadable dvc.lock tracks nothing the report can use: what it needs is missing
        return self._dvc_outs

    def _git_read(self, path: str) -> str | None:
        for _ in range(_LINK_HOPS):
            found = self._tree(path, recursive=False).get(path)
            if found is None:
                return None
            mode, obj = found
            done = _git(self.repo, "cat-file", "blob", obj, text=False)
            if done.returncode != 0:
                return None
            if mode != "120000":
                return done.stdout.decode("utf-8")
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), done.stdout.decode("utf-8")))
            if target.startswith(("/", "../")) or target == "..":
                return None  # a link out of the repository reads nothing
            path = target
        return None

    def read_whole(self, path: str) -> str | None:
        """:meth:`read` of one file of a set written together (evaluate's reports), refused when its folder
        holds the record a killed writer leaves while the set is half replaced (:func:`core.atomic.check_whole`)."""
        record = posixpath.join(posixpath.dirname(path), REPLACING)
        if self.rev is WORKSPACE:
            check_whole(Path(self.repo) / path)
        elif self._tree(record, recursive=False):
            raise InputError(f"is one of a set of outputs a killed run left half-replaced ({record} is committed "
                             "beside it): run the stage that writes them again and commit its outputs",
                             self.source(path))
        return self.read(path)

    def read(self, path: str) -> str | None:
        """The text of ``path`` at this revision; None when it has none."""
        if self.rev is WORKSPACE:
            p = Path(self.repo) / path
            return p.read_text(encoding="utf-8") if p.is_file() else None
        text = self._git_read(path)
        if text is not None or path not in self.dvc_outs():
            return text
        try:
            if self._dvc_fs is None:
                from dvc.api import DVCFileSystem

                self._dvc_fs = DVCFileSystem(self.repo, rev=self.rev)
            with self._dvc_fs.open(path, mode="rb") as fh:
                return fh.read().decode("utf-8")
        except Exception:  # noqa: BLE001  not in the cache nor pushed: the report says "missing"
            return None

    def files(self, root: str) -> set[str]:
        """Every file under ``root`` at this revision (git's, DVC's outputs, or the working tree's)."""
        if self.rev is WORKSPACE:
            top = Path(self.repo)
            return {p.relative_to(top).as_posix() for p in (top / root).rglob("*") if p.is_file()}
        prefix = "" if root == "." else root + "/"
        return set(self._tree(prefix or ".", recursive=True)) | {p for p in self.dvc_outs() if p.startswith(prefix)}


def read_at(path: str, rev: str | None, repo: str = ".") -> str | None:
    """Text of ``path`` at git revision ``rev`` (None: the working tree); None if absent."""
    return Revision(repo, rev).read(path)


# ----------------------------------------------------------------------------- metrics files


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


def flat_numbers(obj, prefix: str = "") -> dict[str, float | int | bool | None]:
    """``{"seen": {"nDCG@10": 0.5}}`` -> ``{"seen.nDCG@10": 0.5}``: every number (and bool, null) of a
    metrics file under its dotted name, as ``dvc metrics diff`` names them; latency left out."""
    out: dict[str, float | int | bool | None] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not prefix and key == LATENCY:
                continue
            out.update(flat_numbers(value, f"{prefix}{key}."))
    elif obj is None or isinstance(obj, (int, float, bool)):
        out[prefix[:-1]] = obj
    return out


def read_metrics(text: str | None, source: str) -> dict | None:
    if text is None:
        return None
    try:
        obj = json_loads(text, source)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})", source, exc.lineno) from None
    if not isinstance(obj, dict):
        raise InputError("not a metrics file (a JSON object)", source)
    return flat_numbers(obj)


def _change(old, new):
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (old, new))
    return new - old if numbers and math.isfinite(old) and math.isfinite(new) else None


def changed_fields(metrics: dict[str, tuple[dict | None, dict | None]]) -> tuple[list[tuple], list[tuple]]:
    """(measures, bookkeeping): (file, field, old, new, change) for every value that differs between the
    revisions (path -> (base fields, head fields)). ``compare.json`` is left out: its statistics are the
    compare stage's own report."""
    measures, bookkeeping = [], []
    for path in sorted(metrics):
        if Path(path).name == COMPARE:
            continue
        old_fields, new_fields = (x or {} for x in metrics[path])
        for name in sorted(set(old_fields) | set(new_fields)):
            old, new = old_fields.get(name), new_fields.get(name)
            if old == new and type(old) is type(new):
                continue
            (measures if is_measure_field(name) else bookkeeping).append((path, name, old, new, _change(old, new)))
    return measures, bookkeeping


# ----------------------------------------------------------------------------- what was read


@dataclass
class Retriever:
    name: str
    sources: tuple[str, str]  # where base and head came from, for error messages
    base: dict | None  # per_query.json "queries" at each revision; None when absent
    head: dict | None
    stats: dict[str, ComparisonRow] = field(default_factory=dict)  # measure -> comparison (judge fills it)
    # its metrics file's fields at each revision (None: no metrics file there)
    means: tuple[dict | None, dict | None] = (None, None)

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
    metrics: dict[str, tuple[dict | None, dict | None]]  # metrics file -> its fields at (base, head)
    measures_changed: list[tuple]
    bookkeeping: list[tuple]
    retrievers: list[Retriever]
    # root option -> (files found under it at base, at head): a root that matches nothing is a blind spot
    found: dict[str, tuple[int, int]] = field(default_factory=dict)
    diagnoses: dict[str, dict | None] = field(default_factory=dict)  # changed retriever -> head's diagnosis
    recall: dict[str, tuple[Series | None, Series | None]] = field(default_factory=dict)  # (base, head)
    losses: dict[str, tuple[Series | None, Series | None]] = field(default_factory=dict)  # variant -> (base, head)
    rankings: dict[str, tuple[Run | None, Run | None]] = field(default_factory=dict)  # each retriever's runs
    # the judgments at each revision (the --qrels path read there), to hold each run to its per-query values
    revision_qrels: tuple[Qrels | None, Qrels | None] = (None, None)
    dataset: Dataset | None = None  # texts for the page (the working tree's), if given
    qrels: Qrels | None = None  # the test judgments (working tree), if given
    timings: dict[str, tuple[dict | None, dict | None]] = field(default_factory=dict)  # retriever -> latency summaries

    @property
    def head_name(self) -> str:
        return self.head or "workspace"

    @property
    def changed(self) -> list[Retriever]:
        return [r for r in self.retrievers if r.status == "changed"]


def _per_query_names(files: set[str], root: str) -> set[str]:
    prefix = root + "/"
    return {p[len(prefix):-len(PER_QUERY) - 1] for p in files
            if p.startswith(prefix) and p.endswith("/" + PER_QUERY) and p.count("/") == root.count("/") + 2}


def _metrics_names(files: set[str], root: str) -> set[str]:
    prefix = root + "/"
    return {p[len(prefix):-5] for p in files if p.startswith(prefix) and p.endswith(".json")
            and "/" not in p[len(prefix):] and p != f"{prefix}{COMPARE}"}


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
    """A timing file's latency summary; None when absent or not one (latency is shown, never gated)."""
    if not text:
        return None
    try:
        summary = json_loads(text)["summary"]
        return summary if all(isinstance(summary.get(k), (int, float)) for k in ("p50_ms", "p95_ms", "qps")) else None
    except (json.JSONDecodeError, InputError, KeyError, TypeError):
        return None


def gather(base: str, head: str | None, paths: ReportPaths, variants: list[str], repo: str = ".",
           retrievers: list[str] | None = None) -> Gathered:
    """Read both revisions: every retriever's per-query results and metrics file, for the changed ones
    the head's diagnosis and both recall curves and runs; each training variant's loss curve.

    ``retrievers``: read only these (default: every retriever either revision has under the reports or
    metrics root)."""
    check_revision(base, repo, "--base")
    if head is not WORKSPACE:
        check_revision(head, repo, "--head")
    paths = paths.resolved(repo)
    revs = (Revision(repo, base), Revision(repo, head))
    listed = [rev.files(paths.reports) | rev.files(paths.metrics) for rev in revs]
    per_query = [_per_query_names(files, paths.reports) for files in listed]
    in_metrics = [_metrics_names(files, paths.metrics) for files in listed]
    found_roots = {"--reports-root": tuple(len(x) for x in per_query),
                   "--metrics-root": tuple(len(x) for x in in_metrics)}
    names = sorted(retrievers if retrievers is not None else set().union(*per_query, *in_metrics))
    found, metrics = [], {}
    for name in names:
        path = paths.report_file(name, PER_QUERY)
        texts = [rev.read_whole(path) for rev in revs]
        sources = (revs[0].source(path), revs[1].source(path))
        entries = [None if t is None else per_query_measures(t, s) for t, s in zip(texts, sources)]
        mpath = paths.metrics_file(name)
        means = tuple(read_metrics(rev.read(mpath), rev.source(mpath)) for rev in revs)
        metrics[mpath] = means
        found.append(Retriever(name, sources, *entries, means=means))
    compare_path = f"{paths.metrics}/{COMPARE}"
    for variant in variants if paths.dvclive else []:
        path = f"{paths.dvclive}/{variant}/{TRAINING_METRICS}"
        metrics[path] = tuple(read_metrics(rev.read(path), rev.source(path)) for rev in revs)
    metrics.pop(compare_path, None)
    measures_changed, bookkeeping = changed_fields(metrics)
    g = Gathered(base, head, paths, metrics, measures_changed, bookkeeping, found, found_roots)
    for r in g.changed:
        text = revs[1].read(paths.report_file(r.name, DIAGNOSIS))
        source = revs[1].source(paths.report_file(r.name, DIAGNOSIS))
        try:
            g.diagnoses[r.name] = json_loads(text, source) if text else None
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg})", source, exc.lineno) from None
        curve = paths.report_file(r.name, RECALL_CURVE)
        g.recall[r.name] = (_curve(revs[0].read(curve)), _curve(revs[1].read(curve)))
    for r in g.retrievers if paths.timing else []:  # latency moves without the results: every retriever
        path = f"{paths.timing}/{r.name}.json"
        g.timings[r.name] = (_timing(revs[0].read(path)), _timing(revs[1].read(path)))
    for variant in variants if paths.dvclive else []:
        path = f"{paths.dvclive}/{variant}/{LOSS_TSV}"
        g.losses[variant] = (_loss(revs[0].read(path)), _loss(revs[1].read(path)))
    _page_inputs(g, revs, repo)
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


def _qrels(text: str | None, source: str) -> Qrels | None:
    if text is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(source).name
        path.write_text(text, encoding="utf-8")
        try:
            return read_qrels(path)
        except InputError as exc:
            raise InputError(str(exc).replace(str(path), source)) from None


def _page_inputs(g: Gathered, revs: tuple[Revision, Revision], repo: str) -> None:
    """Every retriever's run at both revisions (the page's rankings, and what the gate holds each revision's
    per-query values to, with that revision's judgments) and, from the working tree, the texts and
    judgments."""
    paths = g.paths
    if paths.runs is not None:
        for r in g.retrievers:
            path = f"{paths.runs}/{r.name}.trec"
            g.rankings[r.name] = tuple(_run(rev.read(path), rev.source(path)) for rev in revs)
    if paths.qrels is not None and not Path(paths.qrels).is_absolute():
        qrels_path = normal(paths.qrels)
        g.revision_qrels = tuple(_qrels(rev.read(qrels_path), rev.source(qrels_path)) for rev in revs)
    prepared = Path(repo) / paths.prepared if paths.prepared else None
    if prepared is not None and prepared.is_dir() and any(prepared.glob("queries.jsonl*")):
        g.dataset = load_dataset(prepared, [])
        qrels = Path(repo) / paths.qrels if paths.qrels else None
        if qrels is not None and qrels.exists():
            g.qrels = read_qrels(qrels, g.dataset.queries, g.dataset.corpus)
