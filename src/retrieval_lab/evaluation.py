"""The ``evaluate`` stage: one run against one split's qrels -> metrics JSON and a reports folder.

Outputs (each written atomically, all complete before the first is renamed, and replaced as one set:
``core.atomic.atomic_set`` records the set in the reports folder from its first rename to its last, so
an evaluate killed in between leaves a detectably half-replaced set that the next run completes; the
reports folder may hold other stages' files, e.g. fusion.json, so files are replaced one by one, never the
folder, and only those its ``.retrieval-lab-written`` lists):

``metrics``                       means of every ``evaluate.measures`` + query counts + Judged warning
File names: ``report_files`` (shared with ``compare`` and ``report``).

``reports/per_query.json``        per query: measure values, first positive rank, rank of every positive
``reports/recall_curve.csv``      k,recall for k = 1..depth (mean R@k)
``reports/first_positive_ranks.csv``  query,rank; rank = depth + 1 when no positive was retrieved
``reports/first_positive_hist.csv``   bucket,queries: how many queries have their first positive in each rank band
``reports/diagnosis.json|.md``    failure classes of queries without a positive in the top diagnose_k

With a timing (``evaluate --timing FILE``: what ``retrieve --timing`` wrote), the metrics JSON also holds
``latency``: p50/p95/p99 and mean milliseconds, queries per second, the concurrency, what a query's
time covers and the machine, as measured when the run was made (latency.py). Never a measure:
nothing judges or gates it. The pipeline gives none: a wall time would change a tracked file on each run.

``depth`` is the larger of ``retrieve.depth`` and the longest ranking in the run.

Strata: a judged query is *seen* when one of its relevant documents is a positive of a
training query (the dataset's ``qrels/train.tsv``), *unseen* otherwise. A fine-tuned
model can learn where the training targets are; only the unseen stratum says what it
learned about documents it never saw. Both strata's means are written when both hold
queries; when one is empty its count is 0 and a note says why (the support corpus holds
out whole families, so all of its test queries are unseen). A folder without a training
split has no strata: the note says so and per_query.json's ``seen`` is null.

The numbers come from :func:`evaluate` (the library API: :class:`Evaluation`) and
:func:`diagnose_run`; :func:`run_evaluation` only reads the files and writes the results.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import metrics, report_files
from .core import checks
from .core.atomic import atomic_set, check_into, finish_set, record_written
from .core.data import Doc, Qrels, Query, empty_documents_note, load_dataset, positives, read_qrels
from .core.guard import library_output
from .core.kinds import METRICS
from .core.params import Params
from .diagnosis import Diagnosis, diagnose
from .latency import read_summary
from .runs import Run, check_documents, read_run


def judged_measures(measures: list[str], k: int) -> list[str]:
    """The Judged@k measures among ``measures``; Judged@k itself when there is none: every report says how
    much of the top is unjudged, since unjudged documents count as misses (the means are lower bounds)."""
    found = [m for m in measures if metrics.parse_measure(m).family == "Judged"]
    return found or [f"Judged@{k}"]


def check_overlap(qrels: Qrels, run: Run, run_path: str | Path, qrels_path: str | Path) -> None:
    """Refuse a run that shares no query with the qrels (:func:`core.checks.check_overlap`), naming both files."""
    checks.check_overlap(qrels, run, run_path, qrels_path)


RANK_BANDS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None))


def _band(rank: int | None) -> str:
    # Zero-padded labels sort in rank order wherever a plot sorts them as text.
    for low, high in RANK_BANDS:
        if rank is not None and rank >= low and (high is None or rank <= high):
            return f"{low:03d}" if low == high else (f"{low:03d}-{high:03d}" if high else f"{low:03d}+")
    return "not found"


def first_positive_histogram(first: dict[str, int | None]) -> list[tuple[str, int]]:
    """(band, number of queries) for every band, empty ones included, then "not found"."""
    counts = {_band(low): 0 for low, _ in RANK_BANDS}
    counts["not found"] = 0
    for rank in first.values():
        counts[_band(rank)] += 1
    return list(counts.items())


STRATA = ("seen", "unseen")
NO_TRAINING_SPLIT = ("no training split: strata not computed (seen and unseen need judged training queries, "
                     "qrels/train.tsv; they matter only for a model fine-tuned on that split)")


def seen_queries(qrels: Qrels, train: Qrels) -> set[str]:
    """Queries of ``qrels`` with a relevant document that is a positive of a ``train`` query."""
    trained = {d for judged in train.values() for d in positives(judged)}
    return {q for q, judged in qrels.items() if positives(judged) & trained}


@dataclass(frozen=True)
class Strata:
    """The evaluated queries split by whether training saw one of their relevant documents.

    ``means`` is None unless both strata hold queries: a stratum that is the whole adds nothing, and
    ``note`` says which one is empty and why. Without a training split there are no strata at all
    (:attr:`Evaluation.strata` is None), which is not the same as every query being unseen.
    """

    seen: tuple[str, ...]
    unseen: tuple[str, ...]
    means: dict[str, dict[str, float]] | None  # "seen", "unseen" -> measure -> mean

    @property
    def note(self) -> str | None:
        if self.means is not None:
            return None
        if not self.seen:
            return "every evaluated query is unseen: no relevant document is a training positive"
        return "every evaluated query is seen: each has a relevant document that is a training positive"

    def to_json(self) -> dict:
        out: dict = {name: {"queries": len(getattr(self, name)), **(self.means or {}).get(name, {})}
                     for name in STRATA}
        if self.note is not None:
            out["strata_note"] = self.note
        return out


def _strata(qrels: Qrels, run: Run, train: Qrels, measures: list[str], evaluated: list[str],
            judged_only: bool) -> Strata:
    seen = seen_queries(qrels, train)
    members = {"seen": tuple(sorted(q for q in evaluated if q in seen)),
               "unseen": tuple(sorted(q for q in evaluated if q not in seen))}
    means = None
    if all(members.values()):
        means = {name: metrics.measure_run({q: qrels[q] for q in ids}, run, measures, judged_only).means
                 for name, ids in members.items()}
    return Strata(members["seen"], members["unseen"], means)


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value  # no query qualified: null, since NaN is not JSON


@dataclass(frozen=True)
class Evaluation:
    """A run measured against qrels: what ``retrieval-lab score-runs --json`` prints for one run.

    ``means`` and ``per_query`` are keyed by the measure names as given; ``coverage`` says which
    queries the means cover; ``strata`` splits them by a training split when one was given.
    """

    measures: tuple[str, ...]
    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    coverage: metrics.Coverage
    strata: Strata | None = None

    @property
    def query_counts(self) -> dict[str, int]:
        """measure -> queries its mean averages (fewer than ``coverage.queries_evaluated`` for a measure
        with a relevance threshold that some queries never reach)."""
        return {m: self.coverage.queries_by_measure.get(m, self.coverage.queries_evaluated) for m in self.measures}

    def to_json(self, per_query: bool = False) -> dict:
        out = {**{m: _json_number(v) for m, v in self.means.items()}, "judged_only": self.coverage.judged_only,
               **self.coverage.counts(), **self.coverage.query_count_fields()}
        if self.strata is not None:
            out.update(self.strata.to_json())
        if per_query:
            out["per_query"] = self.per_query
        return out


def evaluate(qrels: Qrels, run: Run, measures: list[str], train_qrels: Qrels | None = None,
             judged_only: bool = False) -> Evaluation:
    """Measure ``run`` against ``qrels`` (names as in :mod:`.metrics`); with ``train_qrels``, also each
    stratum's means, so a fine-tuned model's gain on documents it never saw can be told from the rest.

    Refused (:class:`InputError`), as the commands refuse the same in a file: a score that is not a finite
    number, a grade that is not an integer, an id a TREC file cannot carry, a run sharing no query with
    ``qrels``, an unknown measure name.
    """
    measures = list(dict.fromkeys(checks.check_measures(measures)))
    for name in measures:
        metrics.parse_measure(name)
    checks.check_qrels(qrels)
    checks.check_run(run)
    if train_qrels is not None:
        checks.check_qrels(train_qrels, "train_qrels")
    checks.check_overlap(qrels, run)
    result = metrics.measure_run(qrels, run, measures, judged_only)
    strata = None
    if train_qrels:  # None or no judged training query (a test-only collection): no strata, not "all unseen"
        strata = _strata(qrels, run, train_qrels, measures, list(result.per_query), judged_only)
    return Evaluation(tuple(measures), result.means, result.per_query, result.coverage, strata)


def diagnose_run(qrels: Qrels, run: Run, queries: dict[str, Query], corpus: dict[str, Doc], k: int = 10,
                 params: Params | None = None) -> Diagnosis:
    """Why each query without a positive in the top ``k`` failed (:mod:`.diagnosis`), with the tokenizer
    and indexed fields of ``params`` (default: params.yaml's defaults), the ones BM25 searches with.

    Refused (:class:`InputError`), as ``retrieval-lab diagnose`` refuses them: ``k`` below 1, a bad score,
    grade or id, a run sharing no query with ``qrels`` or ranking a document ``corpus`` lacks.
    """
    from .tokenizer import Tokenizer

    k = checks.positive(k, "k")
    checks.check_qrels(qrels)
    checks.check_run(run)
    checks.check_overlap(qrels, run)
    check_documents(run, corpus)
    params = params or Params()
    tokenizer = Tokenizer(params.tokenizer)
    fields = params.retrieve.fields
    return diagnose(qrels, run, {q: queries[q].text for q in qrels if q in queries},
                    lambda d: corpus[d].content(fields), tokenizer.tokenize, k=k)


@dataclass(frozen=True)
class StageResult:
    """What the ``evaluate`` stage computed; :meth:`to_json` is its metrics file, key for key."""

    split: str
    evaluation: Evaluation
    depth: int  # the run's deepest rank, the depth it was made at as far as the file shows ("not found" is one below)
    judged_measures: tuple[str, ...]
    judged_threshold: float
    diagnosis: Diagnosis
    only_relevant_judged: bool  # the qrels judge no document below relevance 1: Judged@k is low by design
    latency: dict | None = None  # the run's timing summary (latency.read_summary), as retrieve measured it

    @property
    def judged_warning(self) -> bool:
        """True when a Judged@k mean is below the threshold: then unjudged documents fill the top and
        every measure is a lower bound, not an estimate."""
        return min(self.evaluation.means[m] for m in self.judged_measures) < self.judged_threshold

    def to_json(self) -> dict:
        ev, coverage = self.evaluation, self.evaluation.coverage
        return {
            **ev.means,
            "queries_evaluated": coverage.queries_evaluated,
            **coverage.query_count_fields(),  # present only for a measure averaged over fewer queries
            "queries_without_positive": coverage.queries_without_positive,
            "judged_queries_absent_from_run": coverage.judged_queries_absent_from_run,
            "run_queries_not_in_qrels": coverage.run_queries_not_in_qrels,
            "depth": self.depth,
            "not_found_rank": self.depth + 1,
            "judged_warning": self.judged_warning,
            "failures_diagnosed": len(self.diagnosis.failures),
            **(ev.strata.to_json() if ev.strata is not None else {"strata_note": NO_TRAINING_SPLIT}),
            **({"latency": self.latency} if self.latency is not None else {}),  # last: other keys keep their bytes
        }


def _json(obj) -> str:
    """As :func:`core.atomic.write_json` writes it."""
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _csv(header: str, rows) -> str:
    return header + "\n" + "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def _load(dataset: str | Path, split: str, qrels_path: str | Path | None):
    """The dataset (with its train qrels when it has them) and the qrels to evaluate on, with their path."""
    has_train = any((Path(dataset) / "qrels" / name).exists() for name in ("train.tsv", "train.tsv.gz"))
    if qrels_path is None:
        data = load_dataset(dataset, list(dict.fromkeys([split] + (["train"] if has_train else []))))
        return data, data.qrels[split], Path(dataset) / "qrels" / f"{split}.tsv"
    data = load_dataset(dataset, ["train"] if has_train else [])
    return data, read_qrels(qrels_path, data.queries, data.corpus), Path(qrels_path)


def run_evaluation(dataset: str | Path, split: str, run_path: str | Path, metrics_path: str | Path,
                   reports: str | Path, params: Params, log: Callable[[str], None] = print,
                   qrels_path: str | Path | None = None, timing_path: str | Path | None = None) -> StageResult:
    """Evaluate ``run_path`` on ``dataset``'s ``split`` (its qrels from ``qrels_path`` when given: the
    held-out test qrels live outside the prepared folder); write metrics and reports.

    ``dataset`` may be any BEIR folder: a raw one works (no strata without ``qrels/train.tsv``).
    ``log`` receives what is reported but not written (documents with no text).
    """
    from .tokenizer import Tokenizer

    cfg = params.evaluate
    # what the CLI's guard refuses, refused here too: metrics replace only earlier metrics, the reports only
    # the files an earlier evaluate wrote into that folder (its .retrieval-lab-written)
    library_output(metrics_path, "evaluate", METRICS)
    check_into(reports, report_files.EVALUATE, "reports")
    finish_set(reports)  # a set a killed evaluate left half-replaced: completed before anything else
    Tokenizer(params.tokenizer)  # fails on bad params before any work
    latency = read_summary(timing_path) if timing_path is not None else None
    data, qrels, source = _load(dataset, split, qrels_path)
    run = read_run(run_path)
    check_overlap(qrels, run, run_path, source)
    check_documents(run, data.corpus, run_path)  # the diagnosis reads every ranked document's text

    judged = judged_measures(cfg.measures, cfg.diagnose_k)
    evaluation = evaluate(qrels, run, cfg.measures + judged, data.qrels.get("train"))
    # the run's own depth, not retrieve.depth: a run made elsewhere or by the user's retriever at k = 3 holds 3
    depth = max(len(docs) for docs in run.values())
    result = StageResult(split, evaluation, depth, tuple(judged), cfg.judged_threshold,
                         diagnose_run(qrels, run, data.queries, data.corpus, cfg.diagnose_k, params),
                         all(r >= 1 for labels in qrels.values() for r in labels.values()), latency)
    ranks = metrics.positive_ranks(qrels, run)
    first = metrics.first_positive_ranks(qrels, run)
    curve = metrics.recall_curve(qrels, run, depth)
    seen = set(evaluation.strata.seen) if evaluation.strata is not None else None
    per_query = {qid: {"measures": values, "first_positive_rank": first[qid], "positive_ranks": ranks[qid],
                       "seen": None if seen is None else qid in seen}
                 for qid, values in evaluation.per_query.items()}
    metrics_json = result.to_json()

    # everything computed before the first file is written: a failure leaves no mix of old and new files
    # and every file is complete in its temporary before the first is renamed into place
    reports = Path(reports)
    texts = {
        reports / report_files.PER_QUERY: _json({"split": split, "run": str(run_path), "depth": depth,
                                                 "queries": per_query}),
        reports / report_files.RECALL_CURVE:
            _csv("k,recall", ((k, repr(float(r))) for k, r in enumerate(curve.tolist(), start=1))),
        reports / report_files.FIRST_POSITIVE_RANKS:
            _csv("query,rank", ((q, depth + 1 if first[q] is None else first[q]) for q in per_query)),
        reports / report_files.FIRST_POSITIVE_HIST:
            _csv("bucket,queries", first_positive_histogram({q: first[q] for q in per_query})),
        reports / report_files.DIAGNOSIS: _json(result.diagnosis.to_json()),
        reports / report_files.DIAGNOSIS_MD: result.diagnosis.to_markdown(
            f"Failure diagnosis: {Path(run_path).name} on {split} (k = {cfg.diagnose_k})"),
        Path(metrics_path): _json(metrics_json),
    }
    record_written(reports, report_files.EVALUATE)  # first: a set killed midway is still ours to replace
    with atomic_set(list(texts), reports, {Path(metrics_path): METRICS}) as temporaries:  # replaced together: a kill midway is completed next run
        for tmp, text in zip(temporaries, texts.values()):
            tmp.write_text(text, encoding="utf-8")
    note = empty_documents_note(data.corpus, params.retrieve.fields,
                                "never returned by lexical runs; judged relevant, each counts as a miss")
    if note:
        log(note)
    return result
