"""scripts/bench_page.py at tiny size: the seeded pair, and one round in headless Chromium."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import load_script
from browser import chromium


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_page")


def test_the_pair_is_seeded_and_shaped(bench):
    texts, qtexts, qrels, base, head = bench.synthetic_pair(30, 20, 200, 12, seed=3)
    assert (texts, qtexts, qrels, base, head) == bench.synthetic_pair(30, 20, 200, 12, seed=3)
    assert len(texts) == 200 and len(qtexts) == 30 and set(base) == set(head) == set(qrels)
    for qid in base:
        assert len(base[qid]) == 20 and 0 < len(head[qid]) <= 20
        assert set(qrels[qid]) <= set(list(base[qid])[:10])  # positives in the top half of the base run
        kept = len(set(base[qid]) & set(head[qid])) / 20
        assert 0.3 < kept < 1.0  # the head keeps most of the base run, not all
        first_positive = next(iter(qrels[qid]))
        assert set(qtexts[qid].split()) <= set(texts[first_positive].split())


def test_one_round_in_chromium(bench, tmp_path, monkeypatch):
    with chromium():
        pass  # skips (or fails in CI) where the browser is missing
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the browser it starts leaves the home folder as it was
    out = tmp_path / "page.json"
    result = bench.main(["--queries", "40", "--depth", "20", "--docs", "300", "--words", "12", "--rounds", "1",
                         "--json", str(out)])
    assert json.loads(out.read_text()) == result
    ms = result["chromium_ms"]
    assert ms["documents_shown"] == 40  # both columns at the runs' whole depth, 20
    assert all(ms[k] > 0 for k in ("load", "parse", "search", "sort", "open_query", "depth"))
    assert result["page"]["documents_stored"] <= 300 and result["page"]["gzip_bytes"] < result["page"]["bytes"]
    assert list(home.iterdir()) == []
