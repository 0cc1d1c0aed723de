"""Multi-positive InfoNCE: every document relevant to a query counts as its positive."""

from __future__ import annotations

import torch


def _check(scores: torch.Tensor, positive_mask: torch.Tensor, allowed: torch.Tensor) -> None:
    if scores.dim() != 2:
        raise ValueError(f"scores must be 2-D (queries x documents), got shape {tuple(scores.shape)}")
    for name, mask in (("positive_mask", positive_mask), ("allowed", allowed)):
        if mask.shape != scores.shape:
            raise ValueError(f"{name} shape {tuple(mask.shape)} differs from scores shape {tuple(scores.shape)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"{name} must be a bool tensor, got {mask.dtype}")
    # Checked before masking: a NaN hidden under a masked-out cell is still a bug upstream.
    if not torch.isfinite(scores).all():
        bad = (~torch.isfinite(scores)).nonzero()[0].tolist()
        raise ValueError(f"scores contain a non-finite value (first at row {bad[0]}, column {bad[1]})")
    usable = (positive_mask & allowed).any(dim=1)  # B
    if not usable.all():
        rows = (~usable).nonzero().flatten().tolist()
        raise ValueError(f"{len(rows)} row(s) have no allowed positive (first: row {rows[0]})")


def _masked_logsumexp(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # -inf outside the mask: exp(-inf) = 0 and its gradient is exactly 0.
    return scores.masked_fill(~mask, float("-inf")).logsumexp(dim=1)  # B


def multi_positive_nce(scores: torch.Tensor, positive_mask: torch.Tensor,
                       allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over queries of ``logsumexp_{j in A_i} s_ij - logsumexp_{j in P_i ∩ A_i} s_ij``.

    ``scores`` (B x D) are already divided by the temperature (the caller's job);
    ``positive_mask`` (B x D, bool) marks the documents relevant to each query,
    ``allowed`` (B x D, bool, default all) the documents that take part at all.
    The loss is -log of the softmax mass the allowed set puts on the positives, so
    several positives share the target instead of competing with each other; its
    gradient is ``(softmax over A_i - softmax over P_i ∩ A_i) / B``.

    Raises ValueError for a shape or dtype mismatch, a non-finite score (checked
    before masking) and any row without an allowed positive.
    """
    if allowed is None:
        allowed = torch.ones_like(positive_mask, dtype=torch.bool)
    _check(scores, positive_mask, allowed)
    if scores.dtype in (torch.float16, torch.bfloat16):
        scores = scores.float()  # under autocast the reduction runs in fp32
    return (_masked_logsumexp(scores, allowed) - _masked_logsumexp(scores, positive_mask & allowed)).mean()


def analytic_gradient(scores: torch.Tensor, positive_mask: torch.Tensor,
                      allowed: torch.Tensor | None = None) -> torch.Tensor:
    """d loss / d scores = (softmax over allowed - softmax over allowed positives) / B, zero elsewhere."""
    if allowed is None:
        allowed = torch.ones_like(positive_mask, dtype=torch.bool)
    _check(scores, positive_mask, allowed)
    scores = scores.detach().double()
    p_all = scores.masked_fill(~allowed, float("-inf")).softmax(dim=1)  # B x D
    p_pos = scores.masked_fill(~(positive_mask & allowed), float("-inf")).softmax(dim=1)  # B x D
    return (p_all - p_pos) / scores.shape[0]
