"""scripts/bench_finetune.py: the plain recipe's miner by hand, its loss against ours, the documented command it mirrors."""

from __future__ import annotations

import random
import re
import shlex

import pytest
import torch
from beir_fixtures import REPO, load_script, write_beir

from retrieval_lab.losses import get_loss


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_finetune")


def test_recipe_pairs_follow_the_recipe_by_hand(bench, tmp_path):
    # 40 documents d01..d40, ranked d01 first for both train queries. q1's positives d05 and d20;
    # q2's positive d02 (above the window); d07 is a test positive. Window = ranks 4..30 = d04..d30.
    # q1: minus d05, d20, d07 -> d04 d06 d08 d09 d10 d11 d12 d13 d14 d15 are the first 10 left.
    # q2: minus d07 -> d04 d05 d06 d08 d09 d10 d11 d12 d13 d14.
    docs = [f"d{i:02d}" for i in range(1, 41)]
    root = write_beir(tmp_path / "beir", [{"_id": d, "title": "", "text": d} for d in docs],
                      [{"_id": q, "text": q} for q in ("q1", "q2", "t1")],
                      {"train": [("q1", "d05", 1), ("q1", "d20", 2), ("q2", "d02", 1)], "test": [("t1", "d07", 1)]})
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{q} Q0 {d} {r} {100 - r} x\n" for q in ("q1", "q2") for r, d in enumerate(docs, 1)))
    pairs = bench.recipe_pairs(str(root), str(run), 42)
    first_10 = {"q1": ["d04", "d06", "d08", "d09", "d10", "d11", "d12", "d13", "d14", "d15"],
                "q2": ["d04", "d05", "d06", "d08", "d09", "d10", "d11", "d12", "d13", "d14"]}
    rng = random.Random(42)  # one generator, pairs in (query, positive) order
    expected = [(q, p, rng.choice(first_10[q])) for q, p in (("q1", "d05"), ("q1", "d20"), ("q2", "d02"))]
    assert pairs == expected


def test_recipe_loss_is_our_multi_positive_nce():
    # the recipe's loss is written inline in the bench (independent of our trainer); on the same
    # scores and mask it must equal the registry's multi_positive_nce
    torch.manual_seed(0)
    scores = torch.randn(4, 8)
    mask = torch.zeros(4, 8, dtype=torch.bool)
    mask[torch.arange(4), torch.arange(4) * 2] = True
    mask[1, 5] = True  # a second positive
    inline = (torch.logsumexp(scores, 1) - torch.logsumexp(scores.masked_fill(~mask, float("-inf")), 1)).mean()
    assert get_loss("multi_positive_nce")(scores, mask).item() == pytest.approx(inline.item(), abs=1e-6)


def test_ours_defaults_to_the_documented_scifact_quality_command(bench):
    # the bench's "ours" must be what the docs tell users to run (docs/datasets.md)
    page = (REPO / "docs" / "datasets.md").read_text(encoding="utf-8")
    match = re.search(r"# quality.*?\n(.*?dvc exp run -n scifact .*?)\n```", page, re.DOTALL)
    assert match, "docs/datasets.md: no SciFact quality command"
    words = shlex.split(match.group(1).replace("\\\n", " "))
    sets = [words[i + 1] for i, w in enumerate(words) if w == "-S" and words[i + 1] != "dataset=scifact"]
    assert sets == bench.SCIFACT_QUALITY
