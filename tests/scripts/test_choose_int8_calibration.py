"""scripts/choose_int8_calibration.py: the first calibration set, in its order of preference, within the bound of
fp32 on validation; the candidates' texts; a refusal when none is within."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import load_script


@pytest.fixture(scope="module")
def script():
    yield from load_script("choose_int8_calibration")


def test_the_first_calibration_within_the_bound(script, tmp_path, monkeypatch, capsys):
    ndcg = {None: 0.6469, "support": 0.6470, "support-half": 0.6452, "dataset-300": 0.6381}  # the SciFact run's

    def isolated(fn, dataset, *rest):
        candidate = None if fn is script.val_means else rest[0]
        row = {"runtime": "torch" if candidate is None else "openvino_int8_static", "bf16": candidate is not None,
               "queries": 121, "nDCG@10": ndcg[candidate], "R@100": 0.94}
        return row if candidate is None else {**row, "calibration": candidate, "texts": 1}

    monkeypatch.setattr(script._bench, "isolated", isolated)
    out = tmp_path / "calibration.json"
    script.main(["--dataset", "d", "--json", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["chosen"] == "support"
    assert [round(r["gap"], 4) for r in result["rows"]] == [0.0001, -0.0017, -0.0088]
    assert "the first calibration within 0.002 of fp32: support" in capsys.readouterr().out
    # support-half is within too, but the whole support corpus is preferred; the dataset's own documents are not
    script.main(["--dataset", "d", "--candidates", "dataset-300", "support-half"])
    assert "within 0.002 of fp32: support-half" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no calibration is within the bound"):
        script.main(["--dataset", "d", "--candidates", "dataset-300"])


def test_the_candidates_texts(script, tmp_path):
    from beir_fixtures import write_family_beir

    from retrieval_lab.core.data import read_corpus
    from retrieval_lab.runtimes.openvino_int8_static import calibration_texts

    beir_dir = write_family_beir(tmp_path)
    corpus = {d.content(["title", "text"]) for d in read_corpus(beir_dir / "corpus.jsonl").values()}

    assert script.calibration("support", str(beir_dir)) == list(calibration_texts())
    assert script.calibration("support-half", str(beir_dir)) == list(calibration_texts())[:120]
    drawn = script.calibration("dataset-300", str(beir_dir))
    assert drawn == script.calibration("dataset-300", str(beir_dir))  # seeded
    assert len(drawn) == len(set(drawn)) == len(corpus) and set(drawn) == corpus  # a small corpus: all of it
