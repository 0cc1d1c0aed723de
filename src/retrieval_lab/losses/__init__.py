"""Contrastive losses over a query x document score matrix, by name.

Each loss takes ``(scores, positive_mask, allowed=None)`` and returns a scalar;
embedding is the caller's job, so losses are tested on plain numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..core.errors import InputError
from .checks import finite_difference_gradient, gradient_check, mask_comparison
from .multi_positive_nce import analytic_gradient, multi_positive_nce
from .symmetric_nce import symmetric_nce

LossFn = Callable[..., torch.Tensor]

LOSSES: dict[str, LossFn] = {
    "multi_positive_nce": multi_positive_nce,
    "symmetric_nce": symmetric_nce,
}


def get_loss(name: str) -> LossFn:
    """The loss ``train.loss`` names; valid choices and the error come from this registry."""
    if name not in LOSSES:
        raise InputError(f"unknown loss {name!r} (choices: {', '.join(sorted(LOSSES))})", field="train.loss")
    return LOSSES[name]


__all__ = ["LOSSES", "analytic_gradient", "finite_difference_gradient", "get_loss", "gradient_check",
           "mask_comparison", "multi_positive_nce", "symmetric_nce"]
