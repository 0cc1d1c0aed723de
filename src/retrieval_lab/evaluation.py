"""The ``evaluate`` stage: one run against one split's qrels -> metrics JSON and a reports folder.

Outputs (each written atomically, all complete before the first is renamed; the reports folder may
hold other stages' files, e.g. fusion.json, so files are replaced one by one, never the folder, and only
those its ``.retrieval-lab-written`` lists):

``metrics``                       means of every ``evaluate.measures`` + query counts + Judged warning
File names: ``report_files`` (shared with ``compare`` and ``report``).

``reports/per_query.json``        per query: measure values, first positive rank, rank of every positive
``reports/recall_curve.csv``      k,recall for k = 1..depth (mean R@k)
``reports/first_positive_ranks.csv``  query,rank; rank = depth + 1 when no positive was retrieved
``reports/first_positive_hist.csv``   bucket,queries: how many queries have their first positive in each rank band
``reports/diagnosis.json|.md``    failure classes of queries without a positive in the top diagnose_k

``depth`` is the larger of ``retrieve.depth`` and the longest ranking in the run.

Strata: a judged query is *seen* when one of its relevant documents is a positive of a
training query (the dataset's ``qrels/train.tsv``), *unseen* otherwise. A fine-tuned
model can learn where the training targets are; only the unseen stratum says what it
learned about documents it never saw. Both strata's means are written when both hold
queries; when one is empty its count is 0 and a note says why (the support corpus holds
out whole families, so all of its test queries are unseen).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from . import metrics, report_files
from .core.atomic import atomic_path, record_written
from .core.data import Qrels, empty_documents_note, load_dataset, positives, read_qrels
from .core.errors import InputError
from .core.params import Params
from .diagnosis import diagnose, to_markdown
from .runs import check_documents, read_run


def judged_measures(measures: list[str], k: int) -> list[str]:
    """The Judged@k measures among ``measures``; Judged@k itself when there is none."""
    found = [m for m in measures if metrics.parse_measure(m).family == "Judged"]
    return found or [f"Judged@{k}"]


def check_overlap(qrels: dict, run: dict, run_path: str | Path, qrels_path: str | Path) -> None:
    if not any(qid in qrels for qid in run):
        raise InputError(f"the run shares no query with the qrels {qrels_path} "
                         f"({len(run)} run queries, {len(qrels)} judged)", str(run_path))


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


def seen_queries(qrels: Qrels, train: Qrels) -> set[str]:
    """Queries of ``qrels`` with a relevant document that is a positive of a ``train`` query."""
    trained = {d for judged in train.values() for d in positives(judged)}
    return {q for q, judged in qrels.items() if positives(judged) & trained}


def strata_means(qrels: Qrels, run: dict, train: Qrels, measures: list[str]) -> dict:
    """``{"seen": {"queries": n, measure: mean, ...}, "unseen": {...}}``, means only when both strata hold
    evaluated queries (otherwise the one stratum is the whole and ``strata_note`` says so)."""
    seen = seen_queries(qrels, train)
    evaluated = {q for q, judged in qrels.items() if positives(judged)}
    members = {"seen": sorted(evaluated & seen), "unseen": sorted(evaluated - seen)}
    out: dict = {name: {"queries": len(ids)} for name, ids in members.items()}
    if all(members.values()):
        for name, ids in members.items():
            out[name].update(metrics.measure_run({q: qrels[q] for q in ids}, run, measures).means)
    else:
        empty = next(name for name, ids in members.items() if not ids)
        out["strata_note"] = (f"every evaluated query is {'unseen' if empty == 'seen' else 'seen'}: "
                       + ("no relevant document is a training positive" if empty == "seen"
                          else "each has a relevant document that is a training positive"))
    return out


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
                   qrels_path: str | Path | None = None) -> dict:
    """Evaluate ``run_path`` on ``dataset``'s ``split`` (its qrels from ``qrels_path`` when given: the
    held-out test qrels live outside the prepared folder); write metrics and reports; return the metrics.

    ``log`` receives what is reported but not written (documents with no text).
    """
    from .tokenizer import Tokenizer

    cfg = params.evaluate
    tokenizer = Tokenizer(params.tokenizer)  # fails on bad params before any work
    data, qrels, source = _load(dataset, split, qrels_path)
    run = read_run(run_path)
    check_overlap(qrels, run, run_path, source)
    check_documents(run, data.corpus, run_path)  # the diagnosis reads every ranked document's text

    judged = judged_measures(cfg.measures, cfg.diagnose_k)
    measures = list(dict.fromkeys(cfg.measures + judged))
    result = metrics.measure_run(qrels, run, measures)
    depth = max([params.retrieve.depth] + [len(docs) for docs in run.values()])
    ranks = metrics.positive_ranks(qrels, run)
    first = metrics.first_positive_ranks(qrels, run)
    curve = metrics.recall_curve(qrels, run, depth)
    fields = params.retrieve.fields
    diagnosis = diagnose(qrels, run, {q: data.queries[q].text for q in qrels},
                         lambda d: data.corpus[d].content(fields), tokenizer.tokenize, k=cfg.diagnose_k)

    train = data.qrels.get("train", {})
    seen = seen_queries(qrels, train)
    per_query = {qid: {"measures": values, "first_positive_rank": first[qid], "positive_ranks": ranks[qid],
                       "seen": qid in seen}
                 for qid, values in result.per_query.items()}
    lowest_judged = min(result.means[m] for m in judged)
    report = result.report
    out = {
        **result.means,
        "queries_evaluated": report["queries_evaluated"],
        **metrics.measure_query_counts(report),  # present only for a measure averaged over fewer queries
        "queries_without_positive": report["queries_without_positive"],
        "judged_queries_absent_from_run": report["judged_queries_absent_from_run"],
        "run_queries_not_in_qrels": report["run_queries_not_in_qrels"],
        "depth": depth,
        "not_found_rank": depth + 1,
        "judged_warning": lowest_judged < cfg.judged_threshold,
        "failures_diagnosed": diagnosis["summary"]["diagnosed"],
        **strata_means(qrels, run, train, measures),
    }

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
        reports / report_files.DIAGNOSIS: _json(diagnosis),
        reports / report_files.DIAGNOSIS_MD:
            to_markdown(diagnosis, f"Failure diagnosis: {Path(run_path).name} on {split} (k = {cfg.diagnose_k})"),
        Path(metrics_path): _json(out),
    }
    with contextlib.ExitStack() as stack:
        for target, text in texts.items():
            stack.enter_context(atomic_path(target)).write_text(text, encoding="utf-8")
    record_written(reports, report_files.EVALUATE)
    note = empty_documents_note(data.corpus, fields,
                                "never returned by lexical runs; judged relevant, each counts as a miss")
    if note:
        log(note)
    return out
