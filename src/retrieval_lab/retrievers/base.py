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
    if not positive_only:
        candidates = np.arange(scores.shape[0])
        if candidates.size > depth:
            kth = _kth_largest(scores, depth)
            candidates = candidates[scores >= kth]  # keeps every tie at the cut
        return dict(ranked(dict(zip(map(doc_ids.__getitem__, candidates.tolist() if rows is None else
                                        rows[candidates].tolist()), scores[candidates].tolist())))[:depth])
    positive = scores > 0
    if positive.all():  # a sparse retriever's scores of the documents it met: no gather of every one
        candidates, values = None, scores
    else:
        candidates = positive.nonzero()[0]
        values = scores[candidates]
    # from here every value is > 0: no NaN
    if values.size > 4 * depth:  # first a lower bound on the cut: the depth-th best of the first 4 x depth
        keep = (values >= _kth_largest(values[:4 * depth], depth)).nonzero()[0]
        candidates, values = keep if candidates is None else candidates[keep], values[keep]
    elif candidates is None:
        candidates = np.arange(values.size)
    if candidates.size > depth:
        keep = values >= _kth_largest(values, depth)  # every tie at the cut
        candidates, values = candidates[keep], values[keep]
    order = np.argsort(values)[::-1]  # score descending
    values = values[order]
    ids = list(map(doc_ids.__getitem__, (candidates if rows is None else rows[candidates])[order].tolist()))
    tied = (values[1:] == values[:-1]).nonzero()[0]  # i: values[i] == values[i + 1]
    if tied.size:  # each run of equal scores ordered by document id, descending (trec_eval's order, as ranked's)
        starts = tied[np.diff(tied, prepend=-2) > 1]
        ends = tied[np.diff(tied, append=values.size) > 1] + 2
        for a, b in zip(starts.tolist(), ends.tolist()):
            ids[a:b] = sorted(ids[a:b], reverse=True)
    return dict(zip(ids[:depth], values[:depth].tolist()))


def _kth_largest(values: np.ndarray, k: int):
    """The k-th largest of ``values`` (1 <= k <= its size)."""
    return np.partition(values, values.size - k)[values.size - k]
