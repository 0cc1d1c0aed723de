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
                encoded: EncodedDocuments | None = None, candidates: Candidates | None = None) -> dict[str, float]:
    """Encode queries and documents, rank every document by dot product, return the mean of each measure.

    ``documents``: (ids, N x H embeddings) to rank instead of encoding ``doc_texts`` (a query-side model).
    ``encoded``: keeps the document embeddings this call made, under the weights' digest.
    ``candidates``: rank only its documents; its first call ranks every document, fixes them from that
    ranking (:class:`Candidates`) and is measured on them too, so that every call measures the same thing.
    """
    from ..metrics import measure_run

    query_ids = sorted(qrels)
    q = encoder.encode([query_texts[i] for i in query_ids], dense.batch_size, dense.max_seq_length,
                       dense.bf16)  # Q x H
    if documents is not None:
        doc_ids, d = list(documents[0]), documents[1]  # N x H
    elif candidates is not None and candidates.ids is not None:
        doc_ids = candidates.ids  # only these: the documents' encode is the validation's cost
        d = encoder.encode([doc_texts[i] for i in doc_ids], dense.batch_size, dense.max_seq_length,
                           dense.bf16)  # C x H
    else:
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
    if candidates is not None and candidates.ids is None:
        keep = candidates.fix(_rank(q, d, doc_ids, query_ids, candidates.per_query), doc_ids)
        doc_ids, d = candidates.ids, d[keep]  # C x H
    run = _rank(q, d, doc_ids, query_ids, depth)
    return measure_run(qrels, run, measures).means


def _rank(q: np.ndarray, d: np.ndarray, doc_ids: list[str], query_ids: list[str],
          depth: int) -> dict[str, dict[str, float]]:
    """Each query's top ``depth`` documents by dot product, exhaustively, without a Q x N matrix at once."""
    k = min(depth, len(doc_ids))
    run = {}
    chunk = max(1, _SCORES_BUDGET // max(len(doc_ids), 1))  # queries scored at once
    for start in range(0, len(query_ids), chunk):
        scores = q[start:start + chunk] @ d.T  # c x N
        for i, row in enumerate(scores):
            run[query_ids[start + i]] = {doc_ids[j]: float(row[j]) for j in _top_stable(row, k)}
    return run


class Candidates:
    """``train.validate_candidates``: the documents every validation of one training ranks, fixed by its
    first (the untrained model's): the union of that model's top ``per_query`` for the val queries.

    Validation then measures re-ranking the base model's candidates, not retrieval from the whole corpus:
    a document outside the union is missed by every epoch alike, and the figures run higher than the
    whole corpus's (fewer distractors). The choice it makes (which epoch) is what it is for; its cost is
    one encode of the union instead of the corpus. No label is read to choose them.
    """

    def __init__(self, per_query: int):
        self.per_query = per_query
        self.ids: list[str] | None = None

    def fix(self, run: dict[str, dict[str, float]], doc_ids: list[str]) -> np.ndarray:
        """Keep the union of ``run``'s documents, in ``doc_ids`` order; return their positions there."""
        chosen = {d for ranked in run.values() for d in ranked}
        keep = np.array([i for i, d in enumerate(doc_ids) if d in chosen], dtype=np.int64)
        self.ids = [doc_ids[i] for i in keep]
        return keep


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
