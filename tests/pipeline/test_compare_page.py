"""The support pipeline's comparison page (``dvc repro``'s reports/support/compare.html) against compare.json,
the run files and per_query.json, in headless Chromium (``browser.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from browser import chromium, open_page, screenshot
from pipeline_fixtures import DATASET

from retrieval_lab.runs import ranked, read_run

pytestmark = pytest.mark.slow


def page_data(html: str) -> dict:
    block = html.split('<script type="application/json" id="page-data">', 1)[1].split("</script>", 1)[0]
    return json.loads(block)  # \u003c and the like are JSON escapes


def expected_cells(pair: dict) -> list[str]:
    """A compare.json row as the page's summary shows it (formatted here, independently of row_cells)."""
    mde = "-" if math.isnan(pair["mde"]) else f"±{pair['mde']:.4f}"
    return [str(pair["queries"]), f"{pair['baseline_mean']:.4f}", f"{pair['candidate_mean']:.4f}",
            f"{pair['mean_difference']:+.4f}", f"[{pair['ci_low']:+.4f}, {pair['ci_high']:+.4f}]",
            f"{pair['p_adjusted']:.4f}", mde, f"{pair['wins']}/{pair['ties']}/{pair['losses']}", pair["verdict"]]


def test_the_pipeline_page_agrees_with_compare_json_and_the_runs(built_pipeline):
    built: Path = built_pipeline.repo
    compare = json.loads((built / "metrics" / DATASET / "compare.json").read_text())
    path = built / "reports" / DATASET / "compare.html"
    data = page_data(path.read_text(encoding="utf-8"))
    want = []
    for pair in compare["pairs"].values():
        want.append(["all", compare["measure"], pair["baseline"], pair["candidate"], *expected_cells(pair)])
        want += [[stratum, compare["measure"], pair["baseline"], pair["candidate"], *expected_cells(row)]
                 for stratum, row in pair.get("strata", {}).items()]
    got = [[r["stratum"], r["measure"], r["baseline"], r["candidate"], *r["cells"]] for r in data["summary"]["rows"]]
    assert got == want
    assert [[data["runs"][a], data["runs"][b]] for a, b in data["pairs"]] == \
        [[p["baseline"], p["candidate"]] for p in compare["pairs"].values()]

    first = next(iter(compare["pairs"].values()))
    per_query = {n: json.loads((built / "reports" / DATASET / n / "per_query.json").read_text())["queries"]
                 for n in (first["baseline"], first["candidate"])}
    qid = min(per_query[first["baseline"]])
    with chromium() as browser:
        opened = open_page(browser, path)
        page = opened.page
        shown = page.eval_on_selector_all("#summary-table tbody tr", """rows => rows.map(r =>
            [...r.children].map(td => td.textContent))""")
        assert shown == want
        page.click(f"tr[data-query={qid}]")
        for side, name in (("left", first["baseline"]), ("right", first["candidate"])):
            run = read_run(built / "runs" / DATASET / f"{name}.trec")
            docs = page.eval_on_selector_all(f"#ranking-{side} li.doc", "els => els.map(e => e.dataset.doc)")
            assert docs == [d for d, _ in ranked(run[qid])][:10]
        values = page.eval_on_selector_all("#query-measures tbody tr", """rows => rows.map(r =>
            [...r.children].map(td => td.textContent))""")
        for measure, base, cand, *_ in values[:-1]:
            assert base == f"{per_query[first['baseline']][qid]['measures'][measure]:.4f}"
            assert cand == f"{per_query[first['candidate']][qid]['measures'][measure]:.4f}"
        assert opened.requests == [opened.url] and opened.errors == []
        screenshot(page, "compare-page-pipeline.png")
