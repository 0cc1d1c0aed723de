"""Numerical checks of the loss on small rows (used by ``check-loss``, ``mask-demo`` and the tests)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .multi_positive_nce import analytic_gradient, multi_positive_nce


def finite_difference_gradient(loss_fn: Callable[..., torch.Tensor], scores: torch.Tensor, eps: float = 1e-6,
                               **kwargs) -> torch.Tensor:
    """Central differences ``(L(s + eps e_k) - L(s - eps e_k)) / 2 eps``, cell by cell, in float64."""
    base = scores.detach().double()
    grad = torch.zeros_like(base)
    for index in range(base.numel()):
        step = torch.zeros_like(base).view(-1)
        step[index] = eps
        step = step.view_as(base)
        grad.view(-1)[index] = (loss_fn(base + step, **kwargs) - loss_fn(base - step, **kwargs)) / (2 * eps)
    return grad


def gradient_check(scores: torch.Tensor, positive_mask: torch.Tensor, allowed: torch.Tensor | None = None,
                   eps: float = 1e-6, tolerance: float = 1e-6) -> dict:
    """Loss and d loss / d scores three ways (autograd, analytic softmax difference, finite differences)."""
    s = scores.detach().double().requires_grad_(True)
    loss = multi_positive_nce(s, positive_mask, allowed)
    (autograd,) = torch.autograd.grad(loss, s)
    analytic = analytic_gradient(s, positive_mask, allowed)
    finite = finite_difference_gradient(multi_positive_nce, s, eps, positive_mask=positive_mask,
                                        allowed=allowed)
    diff_analytic = (autograd - analytic).abs().max().item()
    diff_finite = (autograd - finite).abs().max().item()
    return {
        "loss": loss.item(),
        "autograd": autograd.tolist(),
        "analytic": analytic.tolist(),
        "finite_difference": finite.tolist(),
        "max_abs_diff_analytic": diff_analytic,
        "max_abs_diff_finite_difference": diff_finite,
        "tolerance": tolerance,
        "ok": diff_analytic <= tolerance and diff_finite <= tolerance,
    }


def mask_comparison(scores: torch.Tensor, positives: list[int]) -> dict:
    """Gradients of one row under the multi-positive mask and a diagonal-style mask.

    The diagonal mask (one positive per query, as in in-batch InfoNCE) keeps only
    ``positives[0]``; every other positive then counts as a negative, so its
    gradient turns positive: gradient descent pushes a relevant document down.
    """
    row = scores.detach().double().reshape(1, -1)  # 1 x D
    multi = torch.zeros_like(row, dtype=torch.bool)
    multi[0, positives] = True
    diagonal = torch.zeros_like(multi)
    diagonal[0, positives[0]] = True
    out = {}
    for name, mask in (("multi_positive", multi), ("diagonal", diagonal)):
        s = row.clone().requires_grad_(True)
        loss = multi_positive_nce(s, mask)
        (grad,) = torch.autograd.grad(loss, s)
        out[name] = {"positives": mask[0].nonzero().flatten().tolist(), "loss": loss.item(),
                     "gradient": grad[0].tolist()}
    others = positives[1:]
    out["flipped"] = [j for j in others
                      if out["multi_positive"]["gradient"][j] < 0 < out["diagonal"]["gradient"][j]]
    out["ok"] = bool(others) and out["flipped"] == others
    return out
