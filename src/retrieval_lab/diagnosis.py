"""Why did a query fail? One class per query whose first positive is not in the top k.

Classes, first match wins:

``no_candidates``     the run returned nothing for the query;
``vocabulary_gap``    no positive shares a single token with the query (after the
                      retriever's tokenization): a lexical retriever cannot find them;
``surface_homonymy``  the top (wrong) document shares more query tokens than any
                      positive does: it looks right on the surface;
``late_rank``         a positive was retrieved, below rank k;
``not_retrieved``     no positive in the run at all, and none of the above.

Independently of the class, ``near_duplicates`` flags top-k documents whose token
sets have Jaccard similarity >= ``near_duplicate`` (the ranking wastes slots on them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .core.data import Qrels, positives
from .metrics import positive_ranks
from .runs import Run, ranked

CLASSES = {
    "no_candidates": "the run returned no document",
    "vocabulary_gap": "no positive shares a token with the query",
    "surface_homonymy": "the top wrong document shares more query tokens than any positive",
    "late_rank": "a positive was retrieved, but below rank k",
    "not_retrieved": "no positive was retrieved, for no other visible reason",
}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _classify(first_rank: int | None, ranking: list, overlap_top: int, overlap_positive: int) -> str:
    if not ranking:
        return "no_candidates"
    if overlap_positive == 0:
        return "vocabulary_gap"
    if overlap_top > overlap_positive:
        return "surface_homonymy"
    return "late_rank" if first_rank is not None else "not_retrieved"


@dataclass(frozen=True)
class TopDocument:
    """The run's first document for a failed query: what the retriever preferred to every positive."""

    doc: str
    score: float
    relevance: int | None  # None: unjudged (qrels that list only relevant documents judge no wrong one)
    shared_tokens: tuple[str, ...]
    text: str  # the start of its indexed text, whitespace collapsed

    def to_json(self) -> dict:
        return {"doc": self.doc, "score": self.score, "relevance": self.relevance,
                "shared_tokens": list(self.shared_tokens), "text": self.text}


@dataclass(frozen=True)
class QueryFailure:
    """One query without a positive in the top k, its class and the evidence the class rests on."""

    query: str
    text: str
    cls: str  # one of CLASSES
    first_positive_rank: int | None
    positive_ranks: dict[str, int | None]
    retrieved: int
    top: TopDocument | None
    query_tokens_shared_top: int
    query_tokens_shared_best_positive: int
    near_duplicates: tuple[tuple[str, str, float], ...]

    def to_json(self) -> dict:
        return {"query": self.query, "text": self.text, "class": self.cls,
                "first_positive_rank": self.first_positive_rank, "positive_ranks": dict(self.positive_ranks),
                "retrieved": self.retrieved, "top": None if self.top is None else self.top.to_json(),
                "query_tokens_shared": {"top": self.query_tokens_shared_top,
                                        "best_positive": self.query_tokens_shared_best_positive},
                "near_duplicates": [list(pair) for pair in self.near_duplicates]}


@dataclass(frozen=True)
class Diagnosis:
    """The failed queries of one run at cutoff ``k``, each with its class (:data:`CLASSES`)."""

    k: int
    near_duplicate_jaccard: float
    queries_with_positive: int
    failures: tuple[QueryFailure, ...]

    def counts(self) -> dict[str, int]:
        """class -> failed queries in it, every class listed."""
        found = Counter(f.cls for f in self.failures)
        return {c: found.get(c, 0) for c in CLASSES}

    @property
    def near_duplicate_queries(self) -> int:
        return sum(bool(f.near_duplicates) for f in self.failures)

    def to_json(self) -> dict:
        summary = {"queries_with_positive": self.queries_with_positive, "diagnosed": len(self.failures),
                   **self.counts(), "near_duplicates": self.near_duplicate_queries}
        return {"k": self.k, "near_duplicate_jaccard": self.near_duplicate_jaccard, "summary": summary,
                "queries": [f.to_json() for f in self.failures]}

    def to_markdown(self, title: str = "Failure diagnosis", examples: int = 20) -> str:
        return to_markdown(self, title, examples)


def diagnose(qrels: Qrels, run: Run, query_text: dict[str, str], doc_text: Callable[[str], str],
             tokenize: Callable[[str], list[str]], k: int = 10, near_duplicate: float = 0.9,
             snippet: int = 200) -> Diagnosis:
    """Diagnose every judged query with a positive whose first positive rank is None or > k.

    ``doc_text(doc_id)`` gives the indexed text and ``tokenize`` the retriever's tokenizer: a
    vocabulary gap is one the retriever itself sees, after its own stemming and stopwords.
    """
    cache: dict[str, set[str]] = {}

    def tokens(doc: str) -> set[str]:
        if doc not in cache:
            cache[doc] = set(tokenize(doc_text(doc)))
        return cache[doc]

    failures = []
    all_ranks = positive_ranks(qrels, run)
    for qid, ranks in all_ranks.items():
        found = [r for r in ranks.values() if r is not None]
        first = min(found, default=None)
        if first is not None and first <= k:
            continue
        ranking = ranked(run.get(qid, {}))
        query_tokens = set(tokenize(query_text.get(qid, "")))
        overlap_positive = max(len(query_tokens & tokens(d)) for d in positives(qrels[qid]))
        top = None
        overlap_top = 0
        if ranking:
            top_doc, top_score = ranking[0]
            overlap_top = len(query_tokens & tokens(top_doc))
            top = TopDocument(top_doc, top_score, qrels[qid].get(top_doc),
                              tuple(sorted(query_tokens & tokens(top_doc))),
                              " ".join(doc_text(top_doc).split())[:snippet])
        top_k = [d for d, _ in ranking[:k]]
        duplicates = tuple((a, b, round(j, 4)) for i, a in enumerate(top_k) for b in top_k[i + 1:]
                           if (j := _jaccard(tokens(a), tokens(b))) >= near_duplicate)
        failures.append(QueryFailure(qid, query_text.get(qid, ""),
                                     _classify(first, ranking, overlap_top, overlap_positive), first, ranks,
                                     len(ranking), top, overlap_top, overlap_positive, duplicates))
    return Diagnosis(k, near_duplicate, len(all_ranks), tuple(failures))


def to_markdown(diagnosis: Diagnosis, title: str = "Failure diagnosis", examples: int = 20) -> str:
    """A readable report: class counts with their meaning, then up to ``examples`` queries per class."""
    k, counts = diagnosis.k, diagnosis.counts()
    lines = [f"# {title}", "",
             (f"{len(diagnosis.failures)} of {diagnosis.queries_with_positive} queries have no positive "
              f"in the top {k}."), "",
             "| class | queries | meaning |", "|---|---:|---|"]
    lines += [f"| {c} | {counts[c]} | {meaning} |" for c, meaning in CLASSES.items()]
    lines += [(f"| (flag) near_duplicates | {diagnosis.near_duplicate_queries} | two top-{k} documents with "
               f"token Jaccard >= {diagnosis.near_duplicate_jaccard} |"), ""]
    for cls in CLASSES:
        members = [f for f in diagnosis.failures if f.cls == cls]
        if not members:
            continue
        lines += [f"## {cls} ({len(members)})", ""]
        for f in members[:examples]:
            shown = ", ".join(f"{d}: {'not retrieved' if r is None else f'rank {r}'}"
                              for d, r in f.positive_ranks.items())
            lines.append(f"- **{f.query}** {f.text!r}")
            lines.append(f"  - positives: {shown}")
            if f.top is not None:
                top = f.top
                # qrels that list only relevant documents judge no wrong one: say so rather than "None"
                judged = "unjudged" if top.relevance is None else f"relevance {top.relevance}"
                lines.append(f"  - top: {top.doc} ({judged}, shares {f.query_tokens_shared_top} query tokens vs "
                             f"{f.query_tokens_shared_best_positive} for the best positive): {top.text!r}")
            if f.near_duplicates:
                pairs = "; ".join(f"{a} ~ {b} ({j})" for a, b, j in f.near_duplicates)
                lines.append(f"  - near duplicates in top {k}: {pairs}")
        if len(members) > examples:
            lines.append(f"- ... {len(members) - examples} more in diagnosis.json")
        lines.append("")
    return "\n".join(lines)
