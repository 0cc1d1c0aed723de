"""What all retrievers share: cutting one query's score vector to its top ``depth``."""

from __future__ import annotations

import numpy as np

from ..runs import ranked


def top_k(scores: np.ndarray, doc_ids: list[str], depth: int, positive_only: bool,
          rows: np.ndarray | None = None) -> dict[str, float]:
    """The ``depth`` best documents of one query, ties at the cut broken like trec_eval (doc id desc).

    ``positive_only`` drops scores <= 0 (for lexical models they mean "no match", not a result).
    ``rows``: score i belongs to document ``doc_ids[rows[i]]`` (scores of some documents only);
    without it, to ``doc_ids[i]``.
    """
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(scores.shape[0])
    if candidates.size > depth:
        values = scores[candidates]
        kth = np.partition(values, values.size - depth)[values.size - depth]  # depth-th largest
        candidates = candidates[values >= kth]  # keeps every tie at the cut
    picked = (candidates if rows is None else rows[candidates]).tolist()
    found = dict(zip((doc_ids[i] for i in picked), scores[candidates].tolist()))
    return dict(ranked(found)[:depth])
