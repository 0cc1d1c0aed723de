"""The compiled loop of a BM25 search on a large collection (numba; imported by :meth:`BM25Index.top` only).

NumPy sums a query's postings in a dozen passes over arrays of its length (gathers, temporaries, scatters);
this loop reads each posting twice, once to add its impact and once to collect the candidates, with no array
but the reused sums. Its arithmetic is the NumPy path's, operation for operation: impact = tf * idf /
(norm + tf) * repeats in float64 (no fast-math, so no reordering and no fused multiply-add), added to the
document's sum term by term in plan order, starting from 0. Measured on 1M MS MARCO-shaped passages at depth
1,000: lab notes, 2026-12-05 (issue 55).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _keep_best(rows, values, m, depth):  # pragma: no cover - compiled
    """The first ``m`` candidates cut to those reaching the ``depth``-th best value (ties kept): (count, that value)."""
    cut = np.partition(values[:m].copy(), m - depth)[m - depth]
    kept = 0
    for i in range(m):
        if values[i] >= cut:
            rows[kept] = rows[i]
            values[kept] = values[i]
            kept += 1
    return kept, cut


@numba.njit(cache=True, nogil=True)
def _rarest_first(indptr, terms):  # pragma: no cover - compiled
    """The positions of ``terms`` by their postings, fewest first, ties in plan order (an insertion sort: a
    query has a few terms, and it compiles in a fraction of np.argsort's time)."""
    order = np.empty(terms.size, np.int64)
    for j in range(terms.size):
        length, k = indptr[terms[j] + 1] - indptr[terms[j]], j
        while k > 0 and indptr[terms[order[k - 1]] + 1] - indptr[terms[order[k - 1]]] > length:
            order[k] = order[k - 1]
            k -= 1
        order[k] = j
    return order


@numba.njit(cache=True, nogil=True)
def top_rows(indptr, docs, tf, norm, terms, idfs, repeats, depth, sums, rows, values):  # pragma: no cover - compiled
    """Sum the postings of ``terms`` into ``sums`` (all zero, left all zero), and write into ``rows``/``values``
    every document whose sum reaches the ``depth``-th best (ties too): their count, or -1 when ``rows`` ran
    full of ties (the caller retries with more room). Impacts must be positive: a sum of 0 is an unmet document.
    """
    for j in range(terms.size):
        idf, repeat = idfs[j], repeats[j]
        for p in range(indptr[terms[j]], indptr[terms[j] + 1]):
            f = np.float64(tf[p])
            sums[docs[p]] += f * idf / (norm[docs[p]] + f) * repeat
    room, found, cut, full = rows.size, 0, 0.0, False
    # each document read back where its postings are, and its sum cleared; the rarest terms' first, whose
    # documents score highest: the cut rises early and few of the others are kept
    for j in _rarest_first(indptr, terms):
        for p in range(indptr[terms[j]], indptr[terms[j] + 1]):
            d = docs[p]
            value = sums[d]
            sums[d] = 0.0
            if value >= cut and value > 0.0 and not full:  # mostly false at its first test once the cut has risen
                if found == room:  # full: keep the depth best so far; the cut rises
                    found, cut = _keep_best(rows, values, found, depth)
                    full = found == room
                if value >= cut and not full:
                    rows[found] = d
                    values[found] = value
                    found += 1
    if full:
        return -1
    if found > depth:
        found, cut = _keep_best(rows, values, found, depth)
    return found
