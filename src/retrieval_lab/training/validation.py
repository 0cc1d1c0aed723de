"""Validation: an encoder measured in memory (encode queries and documents, rank exhaustively, score with
:mod:`~retrieval_lab.metrics`).

Training validates with it (``train``'s val metrics, which select the weights) and
``scripts/bench_finetune.py`` scores its contenders with it. The ``evaluate`` stage
measures runs on disk instead (:mod:`retrieval_lab.evaluation`).
"""

from __future__ import annotations

import numpy as np

from ..core.params import DenseParams
from .checkpoint import weights_digest

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
                documents: tuple[list[str], np.ndarray] | None = None,
                encoded: EncodedDocuments | None = None) -> dict[str, float]:
    """Encode queries and documents, rank every document by dot product, return the mean of each measure.

    ``documents``: (ids, N x H embeddings) to rank instead of encoding ``doc_texts`` (a query-side model).
    ``encoded``: keeps the document embeddings this call made, under the weights' digest.
    """
    from ..metrics import measure_run

    query_ids = sorted(qrels)
    q = encoder.encode([query_texts[i] for i in query_ids], dense.batch_size, dense.max_seq_length,
                       dense.bf16)  # Q x H
    if documents is None:
        doc_ids = list(doc_texts)
        digest = weights_digest(encoder.model) if encoded is not None else None
        made = encoded.get(digest) if encoded is not None else None
        if made is not None:
            d = made[0]  # N x H, by these exact weights
        else:
            d = encoder.encode([doc_texts[i] for i in doc_ids], dense.batch_size, dense.max_seq_length,
                               dense.bf16)  # N x H
            if encoded is not None:
                encoded.keep(digest, d, encoder.last_truncated)
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


class EncodedDocuments:
    """The corpus embeddings of one set of weights, kept by the weights' digest and used instead of an
    encode of the same texts with the same settings (same process or encode stage: the same bytes).

    Two encodes are saved per training: the first validation (the base model) takes the base model's
    embeddings folder, which the ``encode`` stage already made; the stage's final encode takes the
    selected weights' validation encode (the selected epoch's, or the last one's). On SciFact each is
    a minute or more on CPU. Matrices are kept while they fit in ``budget_bytes``; one that does not
    fit is not kept, and is encoded again when needed.
    """

    def __init__(self, budget_bytes: int = 1 << 29):
        self.budget_bytes = budget_bytes
        self._kept: dict[str, tuple[np.ndarray, int]] = {}

    def keep(self, digest: str, matrix: np.ndarray, truncated: int) -> None:
        used = sum(m.nbytes for m, _ in self._kept.values())
        if used + matrix.nbytes <= self.budget_bytes:
            self._kept[digest] = (matrix, truncated)

    def get(self, digest: str) -> tuple[np.ndarray, int] | None:
        """(N x H embeddings, documents truncated) made by the weights of ``digest``, or None."""
        return self._kept.get(digest)
