"""Validation: an encoder measured in memory (encode queries and documents, rank exhaustively, score with
:mod:`~retrieval_lab.metrics`).

Training validates with it (``train``'s val metrics, which select the weights) and
``scripts/bench_finetune.py`` scores its contenders with it. The ``evaluate`` stage
measures runs on disk instead (:mod:`retrieval_lab.evaluation`).
"""

from __future__ import annotations

import numpy as np

from ..core.params import DenseParams

_SCORES_BUDGET = 1 << 24  # query x document scores held at once (64 MiB of float32)


def _top_stable(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, lower index first among equals: a stable descending sort's
    first ``k``, in O(n + k log k) instead of O(n log n)."""
    if k <= 0:
        return np.zeros(0, np.int64)
    kth = np.partition(row, len(row) - k)[len(row) - k]
    candidates = np.flatnonzero(row >= kth)  # every tie at the cut
    return candidates[np.lexsort((candidates, -row[candidates]))[:k]]


def dense_means(encoder, qrels: dict, query_texts: dict[str, str], doc_texts: dict[str, str],
                dense: DenseParams, depth: int, measures: list[str],
                documents: tuple[list[str], np.ndarray] | None = None) -> dict[str, float]:
    """Encode queries and documents, rank every document by dot product, return the mean of each measure.

    ``documents``: (ids, N x H embeddings) to rank instead of encoding ``doc_texts`` (a query-side model).
    """
    from ..metrics import measure_run

    query_ids = sorted(qrels)
    q = encoder.encode([query_texts[i] for i in query_ids], dense.batch_size, dense.max_seq_length,
                       dense.bf16)  # Q x H
    if documents is None:
        doc_ids = list(doc_texts)
        d = encoder.encode([doc_texts[i] for i in doc_ids], dense.batch_size, dense.max_seq_length,
                           dense.bf16)  # N x H
    else:
        doc_ids, d = list(documents[0]), documents[1]  # N x H
    k = min(depth, len(doc_ids))
    run = {}
    chunk = max(1, _SCORES_BUDGET // max(len(doc_ids), 1))  # queries scored at once: no Q x N matrix
    for start in range(0, len(query_ids), chunk):
        scores = q[start:start + chunk] @ d.T  # c x N
        for i, row in enumerate(scores):
            run[query_ids[start + i]] = {doc_ids[j]: float(row[j]) for j in _top_stable(row, k)}
    return measure_run(qrels, run, measures).means
