"""The per-query comparison page: one self-contained HTML file that shows *why* two runs differ.

Written by the ``compare`` stage (``--html``), by ``retrieval-lab report`` and by ``retrieval-lab page``
(two run files, with or without judgments). The file holds everything it shows: the script and style
(``page.js``, ``page.css`` beside this module, inlined) and the data, one JSON document in a
``<script type="application/json">`` block. It loads nothing from anywhere, so it opens from ``file://``
and as a CI artifact.

Safety: every text of the data (queries, documents, run names) reaches the page as data, never as
markup. In the JSON block ``<``, ``>`` and ``&`` are written ``\\u003c``, ``\\u003e``, ``\\u0026`` (a
document holding ``</script>`` cannot close the block), and the script inserts texts with ``textContent``
only, never ``innerHTML``.

Scale: each document text is stored once (a table that rankings index into), the rankings as integer
indices; the table shows a page of rows at a time and a query's rankings are built only when it is
opened (``docs/comparison-page.md``; ``scripts/bench_page.py`` measures 10,000 queries at depth 100).

Contents: the summary (every comparison with its simultaneous interval and verdict, the strata, the
gate's decision and why), the per-query table of a chosen pair (difference on any measure, both values,
stratum, diagnosis class, judged share; sortable, filterable), and the query view (both rankings side
by side with relevance grades, the documents that moved linked across the columns, the positives that
neither shows, the query's terms highlighted, the diagnosis in words). Rank-biased overlap (:func:`rbo`)
contrasts two rankings without judgments, so a page can be made from two runs alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .comparison import (
    ALL,
    ComparisonRow,
    Comparisons,
    RunsComparison,
    per_query_measures,
    rough_tail_note,
    row_cells,
    rule_sentence,
    strata_flags,
)
from .core.atomic import check_whole, write_text
from .core.data import require_file
from .core.errors import InputError
from .core.guard import library_output
from .core.kinds import PAGE
from .core.params import Params
from .core.parse import json_loads
from .diagnosis import CLASSES
from .report_files import DIAGNOSIS, PER_QUERY
from .runs import Run, ranked

SCRIPT = "page.js"
STYLE = "page.css"
RBO_P = 0.9  # rank-biased overlap's persistence: the top 10 ranks carry about 86% of the weight
RBO = f"RBO(p={RBO_P})"
IN_TOP_K = "in_top_k"  # a query with a positive in the top k: evaluate diagnoses only the others
CLASS_WORDS = {**CLASSES, IN_TOP_K: "a positive is in the top k"}
COLUMNS = ("baseline", "candidate", "queries", "baseline mean", "candidate mean", "difference", "interval",
           "p (adjusted)", "MDE", "win/tie/loss", "verdict")


def rbo(a: list[str], b: list[str], p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat & Zobel 2010, eq. 32) of two rankings, both cut to
    the shorter one's length: 1 for the same order, 0 for no document in common; top ranks weigh most.
    Two empty rankings agree (1); one empty ranking shares nothing (0)."""
    k = min(len(a), len(b))
    if k == 0:
        return 1.0 if not a and not b else 0.0
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    overlap, total = 0, 0.0
    for d in range(1, k + 1):
        x, y = a[d - 1], b[d - 1]
        overlap += 1 if x == y else (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += overlap / d * p ** d
    return overlap / k * p ** k + (1 - p) / p * total


# ----------------------------------------------------------------------------- the summary


@dataclass(frozen=True)
class SummaryRow:
    """One comparison as every table shows it (the cells of :func:`comparison.row_cells`)."""

    baseline: str
    candidate: str
    stratum: str  # "all", "seen", "unseen"
    measure: str
    cells: tuple[str, ...]  # comparison.RowCells: queries, both means, difference, interval, p, MDE, w/t/l, verdict
    excludes_zero: bool

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "candidate": self.candidate, "stratum": self.stratum,
                "measure": self.measure, "cells": list(self.cells), "excludes_zero": self.excludes_zero}


def summary_row(baseline: str, candidate: str, stratum: str, measure: str, row: ComparisonRow) -> SummaryRow:
    return SummaryRow(baseline, candidate, stratum, measure, tuple(row_cells(row)), row.excludes_zero)


@dataclass(frozen=True)
class Gate:
    """The gate's decision in one line and why (``report --fail-on-regression``)."""

    decision: str
    reasons: tuple[str, ...]

    def to_json(self) -> dict:
        return {"decision": self.decision, "reasons": list(self.reasons)}


@dataclass(frozen=True)
class Summary:
    heading: str
    rows: tuple[SummaryRow, ...]
    rule: str  # how the intervals were made (comparison.rule_sentence)
    notes: tuple[str, ...] = ()
    gate: Gate | None = None

    def to_json(self) -> dict:
        return {"heading": self.heading, "columns": list(COLUMNS), "rows": [r.to_json() for r in self.rows],
                "rule": self.rule, "notes": list(self.notes), "gate": None if self.gate is None else self.gate.to_json()}


def comparisons_summary(result: Comparisons) -> Summary:
    """The compare stage's family: each pair's overall row, then its seen/unseen rows."""
    rows = tuple(summary_row(r.baseline, r.candidate, r.stratum, result.measure, r.row) for r in result.rows)
    notes = tuple(n.strip() for n in rough_tail_note([r.row for r in result.rows], result.family))
    notes += tuple(f"{r.row.queries_only_in_one} queries were evaluated for only one of {r.baseline} and "
                   f"{r.candidate} and are left out of that pair." for r in result.rows
                   if r.stratum == ALL and r.row.queries_only_in_one)
    return Summary(f"Paired comparisons on {result.measure}", rows, rule_sentence(result.family, "comparisons"),
                   notes)


def runs_summary(result: RunsComparison, base: str, head: str) -> Summary:
    """``page`` with judgments: one comparison per measure, the measures as one family."""
    rows = tuple(summary_row(base, head, ALL, m, row) for m, row in result.measures.items())
    notes = tuple(n.strip() for n in rough_tail_note(result.measures.values(), result.family))
    flags = " ".join(f"-m {m}" for m in result.measures)
    notes += ((f"The intervals are simultaneous across these {len(result.measures)} measures: `compare-runs` with the "
              f"same measures ({flags}) gives the same intervals; another list of measures is another family, "
              "with other intervals."),)
    return Summary(f"{head} against {base}, one comparison per measure", rows,
                   rule_sentence(result.family, "measures"), notes)


def unjudged_summary(base: str, head: str) -> Summary:
    return Summary(f"{head} against {base}, without judgments", (),
                   f"No judgments were given: the queries are contrasted by {RBO}, the rank-biased overlap of "
                   "the two rankings (1: the same order, 0: no document in common; the top ranks weigh most). "
                   "It says where the runs disagree, not which one is right.")


# ----------------------------------------------------------------------------- the page's data


@dataclass(frozen=True)
class RunData:
    """What the page shows of one run."""

    name: str
    run: Run
    values: Mapping[str, Mapping[str, float]] | None = None  # query -> measure -> value (None: no judgments)
    diagnosis: Mapping[str, str] | None = None  # query -> class of the queries diagnosed (None: not diagnosed)


@dataclass(frozen=True)
class Page:
    """Everything one comparison page holds; :func:`render` turns it into HTML."""

    title: str
    summary: Summary
    runs: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...]  # (baseline, candidate) indices into runs
    measures: tuple[str, ...]  # per-query measures every run has (plus RBO, always)
    query_ids: tuple[str, ...]
    query_texts: tuple[str, ...]
    strata: tuple[str | None, ...]  # "seen" / "unseen" / None per query
    terms: tuple[tuple[str, ...], ...]  # per query: the lowercase words to highlight
    values: tuple[dict[str, list], ...]  # per run: measure -> value per query (None: not measured)
    classes: tuple[list, ...]  # per run: diagnosis class per query (None: no judgment)
    judged: tuple[list, ...]  # per run: share of the top k with a judgment, per query (None: no qrels)
    judged_k: int
    rankings: tuple[list, ...]  # per run: document indices per query (None: not in the run)
    # per run, per query: rank of each judged document of qrels[q], graded 0 too, in qrels[q]'s order (None: absent)
    judged_ranks: tuple[list, ...]
    qrels: tuple[list, ...]  # per query: [[document index, grade], ...] (None: no judgments)
    rbo: tuple[list, ...]  # per pair: RBO per query (None: in neither run)
    doc_ids: tuple[str, ...]
    doc_texts: tuple[str, ...]
    depth: int  # the rankings' stored depth
    note: str = ""  # where the page came from
    measure: str | None = None  # the table's measure when the page opens (the summary's)

    def to_json(self) -> dict:
        return {"title": self.title, "note": self.note, "summary": self.summary.to_json(), "runs": list(self.runs),
                "pairs": [list(p) for p in self.pairs], "measures": list(self.measures), "rbo_name": RBO,
                "queries": {"id": list(self.query_ids), "text": list(self.query_texts), "stratum": list(self.strata),
                            "terms": [list(t) for t in self.terms]},
                "values": list(self.values), "classes": list(self.classes), "class_words": CLASS_WORDS,
                "judged": list(self.judged), "judged_k": self.judged_k, "rankings": list(self.rankings),
                "judged_ranks": list(self.judged_ranks), "qrels": list(self.qrels), "rbo": list(self.rbo),
                "docs": {"id": list(self.doc_ids), "text": list(self.doc_texts)}, "depth": self.depth,
                "measure": self.measure if self.measure in self.measures else None}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no nan/inf


def _class(diagnosis: Mapping[str, str] | None, qrels: Mapping[str, Mapping[str, int]] | None,
           qid: str) -> str | None:
    """A query's failure class. Evaluate diagnoses only the queries without a positive in the top k: with
    the judgments at hand, a query with a positive that it did not diagnose is ``in_top_k``."""
    if diagnosis is None or qid in diagnosis or qrels is None:
        return None if diagnosis is None else diagnosis.get(qid)
    return IN_TOP_K if any(g > 0 for g in qrels.get(qid, {}).values()) else None


def highlight_terms(tokenize, split, finalise, query_texts: Iterable[str], doc_texts: Iterable[str]
                    ) -> list[tuple[str, ...]]:
    """Per query, the lowercase surface words of the shown texts whose token (the retrievers' tokenizer:
    stopwords dropped, stemmed) is one of the query's: ``connection`` is highlighted for ``connecting``."""
    surface: dict[str, set[str]] = {}  # token -> the raw words that give it
    raw_seen: set[str] = set()
    query_texts = list(query_texts)
    for text in [*query_texts, *doc_texts]:
        for raw in set(split(text)) - raw_seen:
            raw_seen.add(raw)
            token = finalise(raw)
            if token:
                surface.setdefault(token, set()).add(raw)
    return [tuple(sorted({w for t in set(tokenize(q)) for w in surface.get(t, ())})) for q in query_texts]


def build_page(title: str, summary: Summary, runs: list[RunData], pairs: list[tuple[str, str]],
               queries: Mapping[str, str] | None = None, qrels: Mapping[str, Mapping[str, int]] | None = None,
               doc_text: Callable[[str], str] | None = None, strata: Mapping[str, bool] | None = None,
               tokenizer=None, depth: int | None = None, judged_k: int = 10, note: str = "",
               measure: str | None = None) -> Page:
    """Gather one page's data.

    The queries are those with a measured value in some run (or, with no values, those of some run).
    ``depth``: rankings are stored to this depth (None: whole runs). ``doc_text``: the shown text of
    each document (absent: the page shows ids only). ``strata``: query -> seen. ``measure``: the table's
    first measure.
    """
    names = [r.name for r in runs]
    index = {n: i for i, n in enumerate(names)}
    given = [r.values or {} for r in runs]
    measured = {q for v in given for q in v}
    qids = sorted(measured or {q for r in runs for q in r.run})
    measures = [m for m in dict.fromkeys(m for v in given for e in v.values() for m in e)
                if all(m in e for v in given for e in v.values())]
    docs: dict[str, int] = {}

    def doc(d: str) -> int:
        return docs.setdefault(d, len(docs))

    rankings, judged_ranks, values, classes, judged = [], [], [], [], []
    judgments = []
    for qid in qids:
        judgments.append(None if qrels is None or qid not in qrels else
                         [[doc(d), int(g)] for d, g in sorted(qrels[qid].items(), key=lambda x: (-x[1], x[0]))])
    full = {}
    for r, vals in zip(runs, given):
        ranks, positions, judged_share = [], [], []
        for qid, qrel in zip(qids, judgments):
            order = [d for d, _ in ranked(r.run[qid])] if qid in r.run else None
            full[(r.name, qid)] = order
            ranks.append(None if order is None else [doc(d) for d in order[:depth]])
            if qrel is None:
                positions.append(None)
                judged_share.append(None)
                continue
            where = {d: i + 1 for i, d in enumerate(order or [])}
            ids = qrels[qid]
            positions.append([where.get(d) for d, g in sorted(ids.items(), key=lambda x: (-x[1], x[0]))])
            judged_share.append(sum(d in ids for d in (order or [])[:judged_k]) / judged_k)
        rankings.append(ranks)
        judged_ranks.append(positions)
        judged.append(judged_share)
        values.append({m: [_finite(float(vals[q][m])) if q in vals else None for q in qids]
                       for m in measures})
        classes.append([_class(r.diagnosis, qrels, qid) for qid in qids])
    contrast = []
    for a, b in pairs:
        contrast.append([None if full[(a, q)] is None and full[(b, q)] is None else
                         rbo(full[(a, q)] or [], full[(b, q)] or []) for q in qids])
    doc_ids = list(docs)
    texts = [doc_text(d) if doc_text is not None else "" for d in doc_ids]
    query_texts = [(queries or {}).get(q, "") for q in qids]
    if tokenizer is not None and (queries or doc_text):
        terms = highlight_terms(tokenizer.tokenize, tokenizer.split, tokenizer.finalise, query_texts, texts)
    else:
        terms = [() for _ in qids]
    stored = max([len(x) for ranks in rankings for x in ranks if x is not None], default=0)
    return Page(title, summary, tuple(names), tuple((index[a], index[b]) for a, b in pairs), tuple(measures),
                tuple(qids), tuple(query_texts),
                tuple(None if strata is None or q not in strata else ("seen" if strata[q] else "unseen")
                      for q in qids),
                tuple(terms), tuple(values), tuple(classes), tuple(judged), judged_k, tuple(rankings),
                tuple(judged_ranks), tuple(judgments), tuple(contrast), tuple(doc_ids), tuple(texts), stored, note,
                measure)


# ----------------------------------------------------------------------------- the pipeline's page


def _json_file(path: Path, hint: str) -> dict:
    require_file(path, hint)
    try:
        return json_loads(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})", str(path), exc.lineno) from None


def diagnosed_classes(diagnosis: dict, source: str) -> dict[str, str]:
    """query -> class of an evaluate stage's diagnosis.json."""
    try:
        return {q["query"]: q["class"] for q in diagnosis["queries"]}
    except (KeyError, TypeError) as exc:
        raise InputError(f"not an evaluate diagnosis.json (no {exc})", source) from None


def compare_page(result: Comparisons, reports_root: str | Path, runs_root: str | Path, dataset: str | Path,
                 qrels_path: str | Path, params: Params) -> Page:
    """The compare stage's page: every pair of ``result``, each run's per-query values, diagnosis and
    ranking (``<runs_root>/<run>.trec``), the query and document texts of the prepared ``dataset`` and the
    judgments the runs were evaluated on (``qrels_path``)."""
    from .core.data import load_dataset, read_qrels
    from .runs import read_run
    from .tokenizer import Tokenizer

    tokenizer = Tokenizer(params.tokenizer)  # bad params fail before any file is read
    pairs = list(dict.fromkeys((r.baseline, r.candidate) for r in result.rows))
    names = list(dict.fromkeys(n for pair in pairs for n in pair))
    data = load_dataset(dataset, [])
    qrels = read_qrels(qrels_path, data.queries, data.corpus)
    runs, strata = [], None
    for name in names:
        path = Path(reports_root) / name / PER_QUERY
        require_file(path, " (run the evaluate stage first)")
        check_whole(path)  # a killed evaluate's half-replaced reports: never shown
        entries = per_query_measures(path.read_text(encoding="utf-8"), str(path))
        strata = strata or strata_flags(entries)
        diagnosis = Path(reports_root) / name / DIAGNOSIS
        runs.append(RunData(name, read_run(require_file(Path(runs_root) / f"{name}.trec")),
                            {q: e["measures"] for q, e in entries.items()},
                            diagnosed_classes(_json_file(diagnosis, " (run the evaluate stage first)"),
                                              str(diagnosis))))
    fields = params.retrieve.fields
    return build_page(f"Per-query comparison: {params.dataset}", comparisons_summary(result), runs, pairs,
                      {q: query.text for q, query in data.queries.items()}, qrels,
                      lambda d: data.corpus[d].content(fields) if d in data.corpus else "", strata, tokenizer,
                      judged_k=params.evaluate.diagnose_k,
                      note=f"The compare stage's pairs on the {params.dataset} test queries; values from each "
                           f"run's {PER_QUERY}, classes from its {DIAGNOSIS}.", measure=result.measure)


def runs_page(base_path: str | Path, head_path: str | Path, params: Params, qrels_path: str | Path | None = None,
              dataset: str | Path | None = None, measures: list[str] | None = None,
              depth: int | None = None) -> Page:
    """``retrieval-lab page``: two run files. With judgments (``qrels_path``) the summary compares
    ``measures`` (default: ``compare.measure`` and ``compare.key_measures``) as one family and the table
    offers every measure of ``evaluate.measures`` too; without, the queries are contrasted by RBO alone.
    ``dataset``: a BEIR folder whose query and document texts are shown (and, with judgments, whose
    texts let each query be diagnosed)."""
    from .comparison import compare_runs
    from .core.data import load_dataset, read_qrels
    from .diagnosis import diagnose
    from .metrics import measure_run, parse_measure
    from .runs import read_run
    from .tokenizer import Tokenizer

    summary_measures = list(dict.fromkeys(measures or [params.compare.measure, *params.compare.key_measures]))
    shown = list(dict.fromkeys(summary_measures + ([] if measures else params.evaluate.measures)))
    for name in shown:
        parse_measure(name)
    tokenizer = Tokenizer(params.tokenizer)
    data = load_dataset(dataset, []) if dataset is not None else None
    qrels = (read_qrels(qrels_path, data.queries if data else None, data.corpus if data else None)
             if qrels_path is not None else None)
    base, head = read_run(base_path), read_run(head_path)
    if qrels is not None:  # as compare-runs: each run must share a query with the judgments, named by its file
        from .core.checks import check_overlap

        check_overlap(qrels, base, base_path, qrels_path)
        check_overlap(qrels, head, head_path, qrels_path)
    elif not set(base) & set(head):
        raise InputError(f"shares no query with {head_path}: two runs of different query sets have nothing to "
                         "contrast", str(base_path))
    names = [Path(base_path).name, Path(head_path).name]
    if names[0] == names[1]:
        names = ["base: " + names[0], "head: " + names[1]]
    fields = params.retrieve.fields
    doc_text = (lambda d: data.corpus[d].content(fields) if d in data.corpus else "") if data else None
    runs = []
    for name, run in zip(names, (base, head)):
        values = diagnosis = None
        if qrels is not None:
            values = measure_run(qrels, run, shown).per_query
            if data is not None:
                found = diagnose(qrels, run, {q: data.queries[q].text for q in qrels if q in data.queries},
                                 doc_text, tokenizer.tokenize, k=params.evaluate.diagnose_k)
                diagnosis = {f.query: f.cls for f in found.failures}
        runs.append(RunData(name, run, values, diagnosis))
    if qrels is not None:
        ev = params.evaluate
        summary = runs_summary(compare_runs(qrels, base, head, summary_measures, ev.ci_level, ev.permutations,
                                            ev.seed), *names)
    else:
        summary = unjudged_summary(*names)
    return build_page(f"Per-query comparison: {names[1]} against {names[0]}", summary, runs, [tuple(names)],
                      {q: query.text for q, query in data.queries.items()} if data else None, qrels, doc_text,
                      None, tokenizer if data else None, depth, params.evaluate.diagnose_k,
                      note=f"Runs {base_path} and {head_path}" + (f", judgments {qrels_path}" if qrels_path else
                                                                   ", no judgments") + ".",
                      measure=summary_measures[0])


# ----------------------------------------------------------------------------- HTML


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def script_json(obj) -> str:
    """JSON safe inside a ``<script>`` block: no ``<``, ``>`` or ``&`` left to end it or open a comment."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _text(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(page: Page) -> str:
    """The whole HTML file. Its content security policy forbids every request (``default-src 'none'``)
    and every script but the page's own (allowed by its hash: no inline event handler would run either)."""
    script = f"\n{_asset(SCRIPT)}"
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
           "base-uri 'none'; form-action 'none'")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(page.title)}</title>", f"<style>\n{_asset(STYLE)}</style>", "</head>", "<body>",
        '<noscript>This page needs JavaScript (it makes no request: everything is in this file).</noscript>',
        '<div id="app"></div>',
        f'<script type="application/json" id="page-data">{script_json(page.to_json())}</script>',
        f"<script>{script}</script>", "</body>", "</html>", ""])


def write_page(path: str | Path, page: Page) -> None:
    """The page; it replaces only an earlier page (its style's first line, :data:`core.kinds.PAGE_STYLE_MARK`,
    is its signature) — :func:`core.guard.library_output`."""
    library_output(path, "write_page", PAGE)
    write_text(path, render(page), kind=PAGE)
