"""Symmetric multi-positive InfoNCE: each query picks its documents, and each positive document its queries."""

from __future__ import annotations

import torch

from .multi_positive_nce import multi_positive_nce


def symmetric_nce(scores: torch.Tensor, positive_mask: torch.Tensor,
                  allowed: torch.Tensor | None = None) -> torch.Tensor:
    """``(L_queries + L_documents) / 2``, both :func:`multi_positive_nce`.

    ``L_queries`` is multi_positive_nce over the rows of ``scores`` (B x D, already divided by the
    temperature): each query against the batch's documents. ``L_documents`` is the same over the
    columns, for the documents that are an allowed positive of some query (C of the D; a hard
    negative is nobody's positive and has no column term): each such document against the batch's
    queries, its positives the queries it is relevant to,

        L_documents = mean over those j of  logsumexp_{i in A_j} s_ij - logsumexp_{i in P_j ∩ A_j} s_ij.

    The column term moves a document toward the queries it answers and away from the others, so
    the document side learns from the batch's queries too (sentence-transformers' symmetric ranking
    loss, with several positives per row and column). Errors as multi_positive_nce's.
    """
    if allowed is None:
        allowed = torch.ones_like(positive_mask, dtype=torch.bool)
    by_query = multi_positive_nce(scores, positive_mask, allowed)
    answered = (positive_mask & allowed).any(dim=0)  # D
    by_document = multi_positive_nce(scores.T[answered], positive_mask.T[answered], allowed.T[answered])  # C x B
    return (by_query + by_document) / 2
