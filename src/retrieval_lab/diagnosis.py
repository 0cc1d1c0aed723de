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


def diagnose(qrels: Qrels, run: Run, query_text: dict[str, str], doc_text: Callable[[str], str],
             tokenize: Callable[[str], list[str]], k: int = 10, near_duplicate: float = 0.9,
             snippet: int = 200) -> dict:
    """Diagnose every judged query with a positive whose first positive rank is None or > k.

    ``doc_text(doc_id)`` gives the indexed text, ``tokenize`` the retriever's tokenizer.
    Returns ``{"k", "summary": {class: count, "near_duplicates": n, ...}, "queries": [...]}``.
    """
    cache: dict[str, set[str]] = {}

    def tokens(doc: str) -> set[str]:
        if doc not in cache:
            cache[doc] = set(tokenize(doc_text(doc)))
        return cache[doc]

    queries = []
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
            top = {"doc": top_doc, "score": top_score, "relevance": qrels[qid].get(top_doc),
                   "shared_tokens": sorted(query_tokens & tokens(top_doc)),
                   "text": " ".join(doc_text(top_doc).split())[:snippet]}
        top_k = [d for d, _ in ranking[:k]]
        duplicates = [[a, b, round(j, 4)] for i, a in enumerate(top_k) for b in top_k[i + 1:]
                      if (j := _jaccard(tokens(a), tokens(b))) >= near_duplicate]
        queries.append({
            "query": qid,
            "text": query_text.get(qid, ""),
            "class": _classify(first, ranking, overlap_top, overlap_positive),
            "first_positive_rank": first,
            "positive_ranks": ranks,
            "retrieved": len(ranking),
            "top": top,
            "query_tokens_shared": {"top": overlap_top, "best_positive": overlap_positive},
            "near_duplicates": duplicates,
        })
    counts = Counter(q["class"] for q in queries)
    summary = {"queries_with_positive": len(all_ranks), "diagnosed": len(queries),
               **{c: counts.get(c, 0) for c in CLASSES},
               "near_duplicates": sum(bool(q["near_duplicates"]) for q in queries)}
    return {"k": k, "near_duplicate_jaccard": near_duplicate, "summary": summary, "queries": queries}


def to_markdown(diagnosis: dict, title: str = "Failure diagnosis", examples: int = 20) -> str:
    """A readable report: class counts with their meaning, then up to ``examples`` queries per class."""
    k, summary = diagnosis["k"], diagnosis["summary"]
    lines = [f"# {title}", "",
             (f"{summary['diagnosed']} of {summary['queries_with_positive']} queries have no positive "
              f"in the top {k}."), "",
             "| class | queries | meaning |", "|---|---:|---|"]
    lines += [f"| {c} | {summary[c]} | {meaning} |" for c, meaning in CLASSES.items()]
    lines += [(f"| (flag) near_duplicates | {summary['near_duplicates']} | two top-{k} documents with "
               f"token Jaccard >= {diagnosis['near_duplicate_jaccard']} |"), ""]
    for cls in CLASSES:
        members = [q for q in diagnosis["queries"] if q["class"] == cls]
        if not members:
            continue
        lines += [f"## {cls} ({len(members)})", ""]
        for q in members[:examples]:
            shown = ", ".join(f"{d}: {'not retrieved' if r is None else f'rank {r}'}"
                              for d, r in q["positive_ranks"].items())
            lines.append(f"- **{q['query']}** {q['text']!r}")
            lines.append(f"  - positives: {shown}")
            if q["top"]:
                top = q["top"]
                lines.append(f"  - top: {top['doc']} (relevance {top['relevance']}, shares "
                             f"{q['query_tokens_shared']['top']} query tokens vs "
                             f"{q['query_tokens_shared']['best_positive']} for the best positive): "
                             f"{top['text']!r}")
            if q["near_duplicates"]:
                pairs = "; ".join(f"{a} ~ {b} ({j})" for a, b, j in q["near_duplicates"])
                lines.append(f"  - near duplicates in top {k}: {pairs}")
        if len(members) > examples:
            lines.append(f"- ... {len(members) - examples} more in diagnosis.json")
        lines.append("")
    return "\n".join(lines)
