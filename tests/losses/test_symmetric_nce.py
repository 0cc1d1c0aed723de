"""symmetric_nce on a hand-computed batch, against finite differences, and against multi_positive_nce."""

from __future__ import annotations

import pytest
import torch

from retrieval_lab.losses import finite_difference_gradient, get_loss, multi_positive_nce, symmetric_nce

T, F = True, False
# 2 queries x 3 documents: q0 -> d0, q1 -> d1; d2 is a hard negative, nobody's positive
SCORES = torch.tensor([[2.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
POSITIVE = torch.tensor([[T, F, F], [F, T, F]])


def test_value_and_gradient_by_hand():
    # e^2 = 7.389056, e = 2.718282
    # rows:    q0 ln(7.389056 + 1 + 2.718282) - 2 = 0.407606; q1 ln(1 + 2.718282 + 1) - 1 = 0.551445; mean 0.479525
    # columns: d0 ln(7.389056 + 1) - 2 = 0.126928;            d1 ln(1 + 2.718282) - 1 = 0.313262;     mean 0.220095
    #          d2 has no positive query: no column term
    # loss = (0.479525 + 0.220095) / 2 = 0.349810
    scores = SCORES.clone().requires_grad_(True)
    loss = symmetric_nce(scores, POSITIVE)
    assert loss.item() == pytest.approx(0.349810, abs=1e-6)
    loss.backward()
    # d/ds_ij = ((softmax of row i - its positives) / 2 rows + (softmax of column j - its positives) / 2 columns) / 2
    # row q0: [7.389056, 1, 2.718282] / 11.107338 - [1, 0, 0] = [-0.334759, 0.090031, 0.244728]
    # row q1: [1, 2.718282, 1] / 4.718282 - [0, 1, 0]          = [0.211942, -0.423883, 0.211942]
    # col d0: [7.389056, 1] / 8.389056 - [1, 0] = [-0.119203, 0.119203]
    # col d1: [1, 2.718282] / 3.718282 - [0, 1] = [0.268941, -0.268941]
    # s00 = (-0.334759/2 - 0.119203/2) / 2 = -0.113490 ; s01 = (0.090031/2 + 0.268941/2) / 2 = 0.089743
    # s02 = (0.244728/2) / 2 = 0.061182                ; s10 = (0.211942/2 + 0.119203/2) / 2 = 0.082786
    # s11 = (-0.423883/2 - 0.268941/2) / 2 = -0.173206 ; s12 = (0.211942/2) / 2 = 0.052986
    expected = [[-0.113490, 0.089743, 0.061182], [0.082786, -0.173206, 0.052986]]
    assert scores.grad.tolist()[0] == pytest.approx(expected[0], abs=2e-6)
    assert scores.grad.tolist()[1] == pytest.approx(expected[1], abs=2e-6)


def test_gradient_matches_finite_differences_with_shared_positives_and_a_mask():
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 6, generator=gen, dtype=torch.float64) * 3
    positive = torch.zeros(4, 6, dtype=torch.bool)
    positive[0, [0, 1]] = True  # two positives for one query
    positive[1, 1] = True       # and a document positive for two queries
    positive[2, 2] = True
    positive[3, 3] = True
    allowed = torch.ones(4, 6, dtype=torch.bool)
    allowed[2, 5] = False       # a cell out of both the row's and the column's sums
    s = scores.clone().requires_grad_(True)
    (autograd,) = torch.autograd.grad(symmetric_nce(s, positive, allowed), s)
    finite = finite_difference_gradient(symmetric_nce, scores, positive_mask=positive, allowed=allowed)
    assert (autograd - finite).abs().max().item() < 1e-8
    assert autograd[2, 5].item() == 0.0


def test_a_symmetric_batch_gives_the_one_sided_loss():
    # S = S^T with one positive per query on the diagonal: every column is a row, so both terms are equal
    gen = torch.Generator().manual_seed(5)
    half = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    scores = half + half.T
    diagonal = torch.eye(5, dtype=torch.bool)
    assert symmetric_nce(scores, diagonal).item() == pytest.approx(multi_positive_nce(scores, diagonal).item(),
                                                                    abs=1e-12)
    # and in general the column term changes the loss
    assert symmetric_nce(half, diagonal).item() != pytest.approx(multi_positive_nce(half, diagonal).item(), abs=1e-3)


def test_registry_and_errors():
    assert get_loss("symmetric_nce") is symmetric_nce
    with pytest.raises(ValueError, match="row"):  # a query without a positive, as multi_positive_nce says
        symmetric_nce(SCORES, torch.tensor([[T, F, F], [F, F, F]]))
