"""scripts/bench_train_levers.py at tiny size: the levers that only regroup texts compute the same step."""

from __future__ import annotations

import pytest
from beir_fixtures import load_script, write_beir

from retrieval_lab.publishing.benchmarks import machine_info


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_train_levers")


def test_regrouping_levers_train_the_same_losses_and_the_run_records_its_machine(bench, tmp_path, monkeypatch):
    # 128 training claims, enough for two rounds of 64 (the warm-up and one timed); texts of 1 to 13 words, so
    # that grouping by length reorders them
    words = ["cell", "protein", "gene", "tumour", "dose", "risk", "trial", "blood", "brain", "virus", "liver", "heart"]
    corpus = [{"_id": f"d{i}", "title": "", "text": " ".join(words[(i + j) % 12] for j in range(1 + i % 13))}
              for i in range(140)]
    queries = [{"_id": f"q{i}", "text": " ".join(words[(i * 5 + j) % 12] for j in range(1 + i * 7 % 11))}
               for i in range(128)]
    root = write_beir(tmp_path / "beir", corpus, queries, {"train": [(f"q{i}", f"d{i}", 1) for i in range(128)]})

    built = bench._Lever.__init__

    def without_dropout(lever, *args):
        built(lever, *args)
        lever.encoder.model.eval()  # gradients still flow; dropout's random masks would differ between levers

    monkeypatch.setattr(bench._Lever, "__init__", without_dropout)
    result = bench.run(str(root), ["fp32", "fp32-nochunk"], rounds=1, max_length=16, seed=0)

    rows = {row["lever"]: row for row in result["rows"]}
    assert set(rows) == {"fp32", "fp32-nochunk"}
    assert rows["fp32"]["x_fp32"] == 1.0
    # each lever its own copy of the same weights on the same batches: 96 texts a step in three groups of 32 by
    # token length, or all at once, differ only by float rounding, so the timed round's two losses agree (after
    # the same two updates)
    assert len(rows["fp32"]["losses"]) == 2
    assert rows["fp32-nochunk"]["losses"] == pytest.approx(rows["fp32"]["losses"], rel=1e-5)
    # the CPU's make, not only its (masked) name: a lever's time means nothing without it
    assert result["machine"]["cpu_id"] == machine_info()["cpu_id"] is not None
