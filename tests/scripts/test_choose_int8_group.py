"""scripts/choose_int8_group.py: the largest group within the bound of fp32 on validation, and a refusal when
none is."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import load_script


@pytest.fixture(scope="module")
def script():
    yield from load_script("choose_int8_group")


def test_the_largest_group_within_the_bound(script, tmp_path, monkeypatch, capsys):
    ndcg = {None: 0.6469, 32: 0.6458, 128: 0.6480, 384: 0.6421}  # fp32, then -0.0011, +0.0011, -0.0048
    monkeypatch.setattr(script._bench, "isolated", lambda fn, dataset, runtime, bf16, group=None: {
        "runtime": runtime, "bf16": bf16, "group": group, "queries": 121, "nDCG@10": ndcg[group], "R@100": 0.94})
    out = tmp_path / "groups.json"
    script.main(["--dataset", "d", "--json", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["chosen"] == 128  # 384 is faster but 0.0048 under fp32
    assert [round(r["gap"], 4) for r in result["rows"]] == [-0.0011, 0.0011, -0.0048]
    assert "the largest group within 0.002 of fp32: 128" in capsys.readouterr().out
    assert script.choose({"nDCG@10": 0.6469}, result["rows"], bound=0.001) is None
    with pytest.raises(SystemExit, match="no group is within the bound"):
        script.main(["--dataset", "d", "--groups", "384"])
