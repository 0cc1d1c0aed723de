"""multi_positive_nce on hand-computed rows: values, gradients, every ValueError."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from retrieval_lab.losses import (
    LOSSES,
    analytic_gradient,
    finite_difference_gradient,
    get_loss,
    gradient_check,
    multi_positive_nce,
)

T, F = True, False
ROW = torch.tensor([[2.0, 1.0, 0.0, -1.0]], dtype=torch.float64)
TWO_POSITIVES = torch.tensor([[T, T, F, F]])


def test_value_and_gradient_by_hand():
    # e^2 = 7.389056, e^1 = 2.718282, e^0 = 1, e^-1 = 0.367879
    # all:       7.389056 + 2.718282 + 1 + 0.367879 = 11.475217
    # positives: 7.389056 + 2.718282                = 10.107338
    # loss = ln 11.475217 - ln 10.107338 = 2.440190 - 2.313262 = 0.126928
    scores = ROW.clone().requires_grad_(True)
    loss = multi_positive_nce(scores, TWO_POSITIVES)
    assert loss.item() == pytest.approx(0.126928, abs=1e-6)
    loss.backward()
    # softmax(all)       = [7.389056, 2.718282, 1, 0.367879] / 11.475217 = [0.643914, 0.236883, 0.087144, 0.032059]
    # softmax(positives) = [7.389056, 2.718282] / 10.107338            = [0.731059, 0.268941, 0, 0]
    # gradient = difference: both positives are pulled up, both negatives pushed down.
    expected = [-0.087144, -0.032059, 0.087144, 0.032059]
    assert scores.grad[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_allowed_mask_and_mean_over_rows():
    # Row 2: scores [0, 0, 3, 1], positive column 1, column 2 not allowed (its 3 must not count).
    # allowed sum = 1 + 1 + e^1 = 4.718282 -> loss = ln 4.718282 - ln e^0 = 1.551445
    # mean over the two rows = (0.126928 + 1.551445) / 2 = 0.839187
    scores = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 3.0, 1.0]], dtype=torch.float64,
                          requires_grad=True)
    positive = torch.tensor([[T, T, F, F], [F, T, F, F]])
    allowed = torch.tensor([[T, T, T, T], [T, T, F, T]])
    loss = multi_positive_nce(scores, positive, allowed)
    assert loss.item() == pytest.approx(0.839187, abs=1e-6)
    loss.backward()
    # row 2: softmax(allowed) = [1, 1, 0, 2.718282] / 4.718282 = [0.211942, 0.211942, 0, 0.576117]
    # minus [0, 1, 0, 0], then / 2 rows
    assert scores.grad[1].tolist() == pytest.approx([0.105971, -0.394029, 0.0, 0.288058], abs=1e-6)
    assert scores.grad[0].tolist() == pytest.approx([-0.043572, -0.016029, 0.043572, 0.016029], abs=1e-6)


def _numpy_gradient(scores: np.ndarray, positive: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    # Independent of torch: softmax over allowed minus softmax over allowed positives, / B.
    def softmax(x, mask):
        e = np.where(mask, np.exp(x - x.max(axis=1, keepdims=True)), 0.0)
        return e / e.sum(axis=1, keepdims=True)
    return (softmax(scores, allowed) - softmax(scores, positive & allowed)) / scores.shape[0]


def test_gradient_matches_softmax_difference_and_finite_differences():
    rng = np.random.default_rng(0)
    scores_np = rng.normal(size=(3, 6)) * 3
    positive_np = np.zeros((3, 6), dtype=bool)
    positive_np[0, [0, 4]] = positive_np[1, 2] = positive_np[2, [1, 3, 5]] = True
    allowed_np = np.ones((3, 6), dtype=bool)
    allowed_np[1, 0] = allowed_np[2, 3] = False  # one allowed positive masked out in row 3
    scores = torch.tensor(scores_np, requires_grad=True)
    positive, allowed = torch.tensor(positive_np), torch.tensor(allowed_np)
    multi_positive_nce(scores, positive, allowed).backward()
    expected = _numpy_gradient(scores_np, positive_np, allowed_np)
    np.testing.assert_allclose(scores.grad.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(analytic_gradient(scores, positive, allowed).numpy(), expected, atol=1e-12)
    finite = finite_difference_gradient(multi_positive_nce, scores, 1e-6, positive_mask=positive, allowed=allowed)
    np.testing.assert_allclose(finite.numpy(), expected, atol=1e-8)
    assert scores.grad[1, 0] == 0 and scores.grad[2, 3] == 0  # not allowed: no gradient at all


def test_gradient_check_reports_agreement():
    report = gradient_check(ROW, TWO_POSITIVES)
    assert report["ok"]
    assert report["loss"] == pytest.approx(0.126928, abs=1e-6)
    assert report["max_abs_diff_finite_difference"] < 1e-8


def test_bf16_scores_are_reduced_in_fp32():
    loss = multi_positive_nce(ROW.to(torch.bfloat16), TWO_POSITIVES)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(0.126928, abs=1e-6)  # 2, 1, 0, -1 are exact in bf16


@pytest.mark.parametrize("scores, positive, allowed, message", [
    (torch.zeros(4), torch.zeros(4, dtype=torch.bool), None, "must be 2-D"),
    (torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool), None, "positive_mask shape"),
    (torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), torch.ones(3, 2, dtype=torch.bool), "allowed shape"),
    (torch.zeros(1, 2), torch.ones(1, 2), None, "must be a bool tensor"),
    (torch.tensor([[1.0, math.inf]]), torch.tensor([[T, F]]), None, "non-finite"),
    # the NaN sits in a cell the mask removes: still an error (checked before masking)
    (torch.tensor([[1.0, math.nan]]), torch.tensor([[T, F]]), torch.tensor([[T, F]]), "row 0, column 1"),
    (torch.zeros(2, 2), torch.tensor([[T, F], [F, F]]), None, "no allowed positive (first: row 1)"),
    (torch.zeros(1, 2), torch.tensor([[T, F]]), torch.tensor([[F, T]]), "no allowed positive"),
])
def test_value_errors(scores, positive, allowed, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        multi_positive_nce(scores, positive, allowed)


def test_registry():
    assert get_loss("multi_positive_nce") is multi_positive_nce
    assert set(LOSSES) == {"multi_positive_nce", "symmetric_nce"}
    with pytest.raises(ValueError, match="unknown loss 'infonce' \\(choices: multi_positive_nce, symmetric_nce\\)"):
        get_loss("infonce")


def test_check_loss_command(capsys):
    from retrieval_lab.cli import main

    assert main(["check-loss"]) == 0
    out = capsys.readouterr().out
    assert "loss       0.126928" in out
    assert "autograd   [-0.087144, -0.032059, +0.087144, +0.032059]" in out
    # a zero tolerance cannot be met by finite differences (they err ~1e-10): the command must fail
    assert main(["check-loss", "--tolerance", "0"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_mask_demo_command_shows_the_sign_flip(capsys):
    from retrieval_lab.cli import main

    assert main(["mask-demo"]) == 0
    out = capsys.readouterr().out
    # diagonal mask keeps only column 0: softmax(all) - [1, 0, 0, 0] = [-0.356086, +0.236883, +0.087144, +0.032059]
    assert "diagonal        positives [0]      loss 0.440190 gradient [-0.356086, +0.236883, +0.087144, +0.032059]" in out
    assert "column 1: -0.032059 (pulled up) with the multi-positive mask, +0.236883 (pushed down)" in out
    # one relevant document only: nothing to flip, so the demo refuses
    assert main(["mask-demo", "--positives", "0"]) == 2
    assert "error: field '--positives': needs at least two columns" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check-loss", "mask-demo"])
def test_loss_commands_refuse_columns_outside_the_row(command, capsys):
    from retrieval_lab.cli import main

    # -1 would wrap around to the last column; 4 is past the end of a 4-column row
    assert main([command, "--positives", "0,-1"]) == 2
    assert "error: field '--positives': columns [-1] outside 0..3" in capsys.readouterr().err
    assert main([command, "--scores", "1,2,3", "--positives", "0,3"]) == 2
    assert "columns [3] outside 0..2" in capsys.readouterr().err
