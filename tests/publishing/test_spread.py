import json

import pytest

from retrieval_lab.publishing import spread


@pytest.fixture(scope="module")
def seed_spread():
    return spread


def _folder(root, name, ft_all, ft_seen, ft_unseen):
    root.mkdir(parents=True)
    (root / "dense.json").write_text(json.dumps({"nDCG@10": 0.6, "queries_evaluated": 3,
                                                 "seen": {"queries": 1}, "unseen": {"queries": 2}}))
    (root / "dense-ft.json").write_text(json.dumps({
        "nDCG@10": ft_all, "queries_evaluated": 3, "seen": {"queries": 1, "nDCG@10": ft_seen},
        "unseen": {"queries": 2, "nDCG@10": ft_unseen}}))
    (root / "compare.json").write_text("{}")
    if name == "a":
        (root / "only-here.json").write_text(json.dumps({"nDCG@10": 1.0, "queries_evaluated": 3}))
    return root


def test_mean_and_sample_sd_by_hand(seed_spread, tmp_path):
    folders = [_folder(tmp_path / "a", "a", 0.70, 0.9, 0.6), _folder(tmp_path / "b", "b", 0.72, 0.9, 0.63),
               _folder(tmp_path / "c", "c", 0.74, 0.9, 0.66)]
    table = seed_spread.spread(folders)
    assert sorted(table) == ["dense", "dense-ft"]  # only-here.json is in one folder only; compare.json is no run
    ft = table["dense-ft"]
    # all: 0.70, 0.72, 0.74 -> mean 0.72, sample sd sqrt((0.02^2 + 0 + 0.02^2) / 2) = 0.02
    assert ft["all"]["mean"] == pytest.approx(0.72) and ft["all"]["sd"] == pytest.approx(0.02)
    assert ft["unseen"]["mean"] == pytest.approx(0.63) and ft["unseen"]["sd"] == pytest.approx(0.03)
    assert ft["seen"]["sd"] == pytest.approx(0.0) and ft["seen"]["queries"] == 1
    assert set(table["dense"]) == {"all"}  # strata without means (one empty) are left out
    text = seed_spread.to_markdown(table, "nDCG@10", 3)
    assert "| dense-ft | 0.7200 ± 0.0200 (3) | 0.9000 ± 0.0000 (1) | 0.6300 ± 0.0300 (2) |" in text
    assert seed_spread.main([str(tmp_path / "missing")]) == 2
