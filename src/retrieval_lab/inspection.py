"""Embedding inspection: connect vectors to texts, and see what fine-tuning changed for a query.

For the first ``n`` queries of a split (qrels file order) and the first ``n``
documents of the corpus (file order) the report gives the text, the embedding's
dimension and norm, and the ``k`` nearest documents of the whole corpus by cosine,
with scores, snippets and relevance marks. :func:`compare` lines up two reports
(base vs fine-tuned) query by query, with the first relevant document's rank under each.
"""

from __future__ import annotations

import numpy as np

from .core.data import Dataset, positives
from .core.errors import InputError
from .core.params import DenseParams
from .runs import ranked

SNIPPET_CHARS = 90


def snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    """The text on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."


def _cosines(rows: np.ndarray, docs: np.ndarray) -> np.ndarray:
    # float64: the printed scores must match an independent dot product to 1e-5
    rows, docs = rows.astype(np.float64), docs.astype(np.float64)
    norms_r = np.linalg.norm(rows, axis=1, keepdims=True)  # [m, 1]
    norms_d = np.linalg.norm(docs, axis=1, keepdims=True)  # [n, 1]
    return (rows @ docs.T) / np.maximum(norms_r * norms_d.T, 1e-12)  # [m, n]


def cosine_matrix(rows: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """``cos(r_i, d_j) = <r_i, d_j> / (||r_i|| ||d_j||)``: rows ``[m, H]``, docs ``[n, H]`` -> ``[m, n]``.

    The encoder's vectors are unit length, so this equals the inner product the
    dense retriever scores with; dividing by the norms keeps it a cosine for any input.
    """
    return _cosines(rows, docs)


def _ranking(scores: np.ndarray, doc_ids: list[str], exclude: str | None = None) -> list[tuple[str, float]]:
    # trec_eval order (score desc, then id desc), as every run in the project
    return ranked({d: float(s) for d, s in zip(doc_ids, scores) if d != exclude})


def first_relevant(order: list[tuple[str, float]], relevant: set[str]) -> tuple[int, str] | None:
    """(1-based rank, document id) of the first relevant document in ``order``; None if none is there."""
    for rank, (did, _) in enumerate(order, start=1):
        if did in relevant:
            return rank, did
    return None


def _entry(kind: str, item_id: str, text: str, vector: np.ndarray, order: list[tuple[str, float]],
           relevant: set[str], dataset: Dataset, fields: list[str], k: int) -> dict:
    first = first_relevant(order, relevant)
    return {
        "kind": kind,
        "id": item_id,
        "text": text,
        "dim": int(vector.shape[0]),
        "norm": float(np.linalg.norm(vector.astype(np.float64))),
        "relevant": sorted(relevant),
        "first_relevant_rank": None if first is None else first[0],
        "first_relevant_id": None if first is None else first[1],
        "neighbours": [{"rank": r, "id": d, "score": s, "relevant": d in relevant,
                        "snippet": snippet(dataset.corpus[d].content(fields))}
                       for r, (d, s) in enumerate(order[:k], start=1)],
    }


def pick(dataset: Dataset, split: str, n: int, k: int = 1) -> tuple[list[str], list[str]]:
    """The first ``n`` query ids of ``split`` (qrels file order) and first ``n`` document ids (corpus order).

    Checks ``n``, ``k`` and the split first, so a command can fail before loading a model.
    """
    for flag, value in (("--n", n), ("--k", k)):
        if value < 1:
            raise InputError(f"expected at least 1, got {value}", field=flag)
    if split not in dataset.qrels:
        have = ", ".join(sorted(dataset.qrels))
        raise InputError(f"split {split!r} not loaded (have: {have})", field="--split")
    return list(dataset.qrels[split])[:n], list(dataset.corpus)[:n]


def inspect(encoder, dataset: Dataset, split: str, n: int, k: int, params: DenseParams,
            fields: list[str]) -> dict:
    """Embed the whole corpus and the picked queries; report each picked query's and document's neighbours.

    A document's neighbours leave the document itself out. ``relevant`` of a query
    is its positives in ``split``; of a document, nothing.
    """
    query_ids, picked_docs = pick(dataset, split, n, k)
    doc_ids = list(dataset.corpus)
    docs = encoder.encode([dataset.corpus[d].content(fields) for d in doc_ids], params.batch_size,
                          params.max_seq_length, params.bf16, params.runtime)  # [n_docs, H]
    queries = encoder.encode([dataset.queries[q].text for q in query_ids], params.batch_size,
                             params.max_seq_length, params.bf16, params.runtime)  # [n_queries, H]
    row_of = {d: i for i, d in enumerate(doc_ids)}
    picked = docs[[row_of[d] for d in picked_docs]]  # [n_picked, H]
    query_scores = cosine_matrix(queries, docs)  # [n_queries, n_docs]
    doc_scores = cosine_matrix(picked, docs)  # [n_picked, n_docs]
    qrels = dataset.qrels[split]
    return {
        "model": encoder.source,
        "dataset": str(dataset.path),
        "split": split,
        "fields": list(fields),
        "k": k,
        "dim": int(docs.shape[1]),
        "queries": [_entry("query", q, dataset.queries[q].text, queries[i],
                           _ranking(query_scores[i], doc_ids), positives(qrels[q]), dataset, fields, k)
                    for i, q in enumerate(query_ids)],
        "documents": [_entry("document", d, dataset.corpus[d].content(fields), picked[i],
                             _ranking(doc_scores[i], doc_ids, exclude=d), set(), dataset, fields, k)
                      for i, d in enumerate(picked_docs)],
    }


def compare_models(base: dict, tuned: dict) -> list[dict]:
    """Per query of both reports: neighbours side by side and the first relevant rank under each model."""
    tuned_by_id = {q["id"]: q for q in tuned["queries"]}
    rows = []
    for query in base["queries"]:
        other = tuned_by_id.get(query["id"])
        if other is None:
            continue
        before, after = query["first_relevant_rank"], other["first_relevant_rank"]
        rows.append({
            "id": query["id"],
            "text": query["text"],
            "relevant": query["relevant"],
            "base_first_relevant_rank": before,
            "tuned_first_relevant_rank": after,
            "rank_change": None if before is None or after is None else before - after,  # > 0: moved up
            "base": query["neighbours"],
            "tuned": other["neighbours"],
        })
    return rows


# ----------------------------------------------------------------------------- text output


def _model_name(source: dict) -> str:
    if "lock" in source:
        return f"{source['name']} @ {str(source['revision'])[:12]} (lock {source['lock']}, hashes verified)"
    return f"model folder {source.get('model_dir', '?')}"


def _neighbour_line(nb: dict, width: int | None = None) -> str:
    mark = "*" if nb["relevant"] else " "
    text = f"{nb['rank']:>3}. {nb['score']:+.4f} {mark} {nb['id']}  {nb['snippet']}"
    if width is None or len(text) <= width:
        return text if width is None else text.ljust(width)
    return text[:width - 3] + "..."  # not snippet(): that would collapse the alignment spaces


def _rank_text(rank: int | None, did: str | None) -> str:
    return "none retrieved" if rank is None else f"rank {rank} ({did})"


def format_report(report: dict) -> str:
    """A person's view of :func:`inspect`'s report; ``*`` marks a relevant document."""
    fields = ", ".join(report["fields"])
    header = (f"dataset: {report['dataset']}  split: {report['split']}  fields: {fields}  "
              f"dim: {report['dim']}  (* = relevant in the split's qrels)")
    lines = [f"model: {_model_name(report['model'])}", header]
    for entry in report["queries"] + report["documents"]:
        lines += ["", f"{entry['kind']} {entry['id']}: {snippet(entry['text'], 200)}",
                  f"  dim {entry['dim']}  norm {entry['norm']:.6f}"]
        if entry["kind"] == "query":
            first = _rank_text(entry["first_relevant_rank"], entry["first_relevant_id"])
            lines.append(f"  relevant: {', '.join(entry['relevant']) or '-'}; first relevant: {first}")
        itself = " (itself left out)" if entry["kind"] == "document" else ""
        lines.append(f"  nearest documents by cosine{itself}:")
        lines += ["    " + _neighbour_line(nb) for nb in entry["neighbours"]]
    return "\n".join(lines)


def format_comparison(base: dict, tuned: dict, width: int = 60) -> str:
    """Side by side, per query: base neighbours | fine-tuned neighbours, and the first relevant ranks."""
    lines = [f"base:       {_model_name(base['model'])}", f"fine-tuned: {_model_name(tuned['model'])}"]
    for row in compare_models(base, tuned):
        change = "" if row["rank_change"] is None else f" ({row['rank_change']:+d})"
        ranks = (f"  first relevant rank: base {row['base_first_relevant_rank'] or 'none'}, "
                 f"fine-tuned {row['tuned_first_relevant_rank'] or 'none'}{change}")
        lines += ["", f"query {row['id']}: {snippet(row['text'], 200)}", ranks,
                  f"    {'base'.ljust(width)} | fine-tuned"]
        for i in range(max(len(row["base"]), len(row["tuned"]))):
            left = _neighbour_line(row["base"][i], width) if i < len(row["base"]) else " " * width
            right = _neighbour_line(row["tuned"][i], width) if i < len(row["tuned"]) else ""
            lines.append(f"    {left} | {right}".rstrip())
    return "\n".join(lines)
