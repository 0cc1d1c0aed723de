"""The comparison page in a real browser (headless Chromium, ``browser.py``): made by the compare stage's
own code from the support corpus's BM25 and LSA runs (generate, prepare, retrieve, evaluate, compare as the
pipeline runs them), and from documents written to attack it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from beir_fixtures import write_beir
from browser import chromium, open_page, require, screenshot
from command_runner import run_command

from retrieval_lab.comparison import difference_text, interval_text
from retrieval_lab.core.data import read_qrels
from retrieval_lab.page import RunData, Summary, build_page, write_page
from retrieval_lab.runs import ranked, read_run

PAIR = ["bm25", "lsa"]


@pytest.fixture(scope="module")
def support(tmp_path_factory) -> Path:
    """The support corpus's lexical half of the pipeline, with the compare stage's page of bm25 vs lsa."""
    root = tmp_path_factory.mktemp("support")
    steps = [("generate", ["--output", f"{root}/raw"]),
             ("prepare", ["--raw", f"{root}/raw", "--output", f"{root}/prepared", "--heldout", f"{root}/heldout"])]
    steps += [("retrieve", ["--retriever", r, "--dataset", f"{root}/prepared", "--output", f"{root}/runs/{r}.trec"])
              for r in PAIR]
    steps += [("evaluate", ["--dataset", f"{root}/prepared", "--split", "test", "--qrels",
                            f"{root}/heldout/qrels/test.tsv", "--run", f"{root}/runs/{r}.trec",
                            "--metrics", f"{root}/metrics/{r}.json", "--reports", f"{root}/reports/{r}"])
              for r in PAIR]
    steps.append(("compare", ["--reports-root", f"{root}/reports", "--output", f"{root}/compare.json",
                              "--markdown", f"{root}/compare.md", "--html", f"{root}/compare.html",
                              "--runs-root", f"{root}/runs", "--dataset", f"{root}/prepared",
                              "--qrels", f"{root}/heldout/qrels/test.tsv", "--set", "compare.pairs=[[bm25, lsa], [lsa, bm25]]"]))
    for name, argv in steps:
        assert run_command(name, argv) == 0, name
    return root


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _per_query(root: Path, run: str) -> dict:
    return json.loads((root / "reports" / run / "per_query.json").read_text())["queries"]


def _column(page, side: str) -> list[str]:
    return page.eval_on_selector_all(f"#ranking-{side} li.doc", "els => els.map(e => e.dataset.doc)")


KEYS = {"id": "id", "text": "text", "base": "base", "cand": "cand", "difference": "diff", "rbo": "rbo",
        "stratum": "stratum", "cls_base": "cls_base", "cls_cand": "cls_cand", "judged": "judged"}


def _header(page) -> list[str]:
    return page.eval_on_selector_all("#queries-table thead th", "ths => ths.map(th => th.dataset.sort)")


def _table(page) -> list[dict]:
    """Each row's cells by its column's sort key (the columns a page shows depend on its measure)."""
    keys = [KEYS[k] for k in _header(page)]
    rows = page.eval_on_selector_all("#queries-table tbody tr",
                                     "rows => rows.map(r => [...r.children].map(td => td.textContent))")
    return [dict(zip(keys, cells)) for cells in rows]


def test_the_support_page_shows_the_runs_and_the_metrics_json(support, browser):
    compare = json.loads((support / "compare.json").read_text())
    values = {r: _per_query(support, r) for r in PAIR}
    runs = {r: read_run(support / "runs" / f"{r}.trec") for r in PAIR}
    qrels = read_qrels(support / "heldout" / "qrels" / "test.tsv")
    opened = open_page(browser, support / "compare.html")
    page = opened.page

    # the summary's numbers are compare.json's
    cells = page.eval_on_selector_all("#summary-table tbody tr", """rows => rows.map(r =>
        [...r.children].map(td => td.textContent))""")
    assert cells == [["all", "nDCG@10", p["baseline"], p["candidate"], str(p["queries"]), f"{p['baseline_mean']:.4f}",
                      f"{p['candidate_mean']:.4f}", difference_text(p), interval_text(p), f"{p['p_adjusted']:.4f}",
                      f"±{p['mde']:.4f}", f"{p['wins']}/{p['ties']}/{p['losses']}", p["verdict"]]
                     for p in compare["pairs"].values()]
    assert [p["baseline"] for p in compare["pairs"].values()] == ["bm25", "lsa"]

    # every query of per_query.json, with its values, and their mean is the metrics file's; the table opens on
    # the compared measure
    assert page.input_value("#measure") == compare["measure"] == "nDCG@10"
    page.select_option("#measure", "RR")
    assert {r["id"]: r["base"] for r in _table(page)} == {q: f"{e['measures']['RR']:.4f}"
                                                          for q, e in values["bm25"].items()}
    page.select_option("#measure", "nDCG@10")
    rows = _table(page)
    assert sorted(r["id"] for r in rows) == sorted(values["bm25"])
    for row in rows:
        base = values["bm25"][row["id"]]["measures"]["nDCG@10"]
        cand = values["lsa"][row["id"]]["measures"]["nDCG@10"]
        assert (row["base"], row["cand"]) == (f"{base:.4f}", f"{cand:.4f}")
        assert row["diff"] == f"{cand - base:+.4f}"
        assert row["stratum"] == ("seen" if values["bm25"][row["id"]]["seen"] else "unseen")
    metrics = json.loads((support / "metrics" / "bm25.json").read_text())
    shown_mean = sum(values["bm25"][r["id"]]["measures"]["nDCG@10"] for r in rows) / len(rows)
    assert shown_mean == pytest.approx(metrics["nDCG@10"], abs=1e-12)

    # sorting: by difference, ascending then descending; by query id
    diffs = [float(r["diff"]) for r in _table(page)]
    assert diffs == sorted(diffs) and diffs[0] < 0 < diffs[-1]
    page.click("th[data-sort=difference]")
    assert [float(r["diff"]) for r in _table(page)] == sorted(diffs, reverse=True)
    page.click("th[data-sort=id]")
    assert [r["id"] for r in _table(page)] == sorted(values["bm25"])

    # filtering: text search, diagnosis class (either run), then back to every query
    page.fill("#search", "dns")
    wanted = {q for q, e in values["bm25"].items() if "dns" in next(r["text"] for r in rows if r["id"] == q).lower()}
    assert wanted and {r["id"] for r in _table(page)} == wanted
    page.fill("#search", "")
    classes = {r: {q["query"]: q["class"] for q in json.loads((support / "reports" / r / "diagnosis.json")
                                                              .read_text())["queries"]} for r in PAIR}
    page.select_option("#class", "late_rank")
    late = {q for q in values["bm25"] if "late_rank" in (classes["bm25"].get(q), classes["lsa"].get(q))}
    assert late and {r["id"] for r in _table(page)} == late
    page.select_option("#class", "")
    assert len(_table(page)) == len(values["bm25"])

    # a query where the runs differ most: both rankings are the run files' top k, values per_query.json's
    qid = max(values["bm25"], key=lambda q: abs(values["lsa"][q]["measures"]["nDCG@10"]
                                                 - values["bm25"][q]["measures"]["nDCG@10"]))
    page.click(f"tr[data-query={qid}]")
    assert page.text_content("#query-id") == qid
    for depth in (10, 20):
        page.select_option("#depth", str(depth))
        for side, run in zip(("left", "right"), PAIR):
            assert _column(page, side) == [d for d, _ in ranked(runs[run][qid])][:depth]
    grades = page.eval_on_selector_all("#ranking-left li.doc", """els => els.map(e =>
        [e.dataset.doc, e.querySelector('.grade').textContent])""")
    assert grades == [[d, f"grade {qrels[qid][d]}" if d in qrels[qid] else "unjudged"] for d, _ in grades]
    shown = page.eval_on_selector_all("#query-measures tbody tr", """rows => rows.map(r =>
        [...r.children].map(td => td.textContent))""")
    for measure, base, cand, *_ in shown[:-1]:
        assert base == f"{values['bm25'][qid]['measures'][measure]:.4f}"
        assert cand == f"{values['lsa'][qid]['measures'][measure]:.4f}"
    assert shown[-1][0] == "RBO(p=0.9)"
    # a document in both columns links to its place in the other
    moved = page.eval_on_selector_all("#ranking-left a.move", "as => as.map(a => a.dataset.target)")
    assert moved and all(page.locator(f"#{t}").count() == 1 for t in moved)

    # a query whose positives neither top 10 holds lists them with their ranks (per_query.json's)
    page.select_option("#depth", "10")
    missed = next(q for q in sorted(values["bm25"]) if all(
        all(r is None or r > 10 for r in values[run][q]["positive_ranks"].values()) for run in PAIR))
    page.click(f"tr[data-query={missed}]")
    listed = page.eval_on_selector_all("#missing li", "els => els.map(e => [e.dataset.doc, "
                                                      "e.querySelector('.where').textContent])")
    want = [[d, "; ".join(f"{run}: " + ("not retrieved" if values[run][missed]["positive_ranks"][d] is None
                                       else f"rank {values[run][missed]['positive_ranks'][d]}") for run in PAIR)]
            for d, _ in sorted(((d, g) for d, g in qrels[missed].items() if g > 0), key=lambda x: (-x[1], x[0]))]
    assert listed == want
    page.click(f"tr[data-query={qid}]")
    assert page.locator("mark").count() > 0  # the query's terms highlighted in the documents
    page.select_option("#pair", "1")  # lsa -> bm25: the open query's columns swap
    assert _column(page, "left") == [d for d, _ in ranked(runs["lsa"][qid])][:10]
    assert _column(page, "right") == [d for d, _ in ranked(runs["bm25"][qid])][:10]
    assert _table(page)[0]["base"] == f"{values['lsa'][_table(page)[0]['id']]['measures']['nDCG@10']:.4f}"

    assert opened.requests == [opened.url], opened.requests  # nothing but the file itself
    assert opened.errors == [] and opened.dialogs == []
    assert screenshot(page, "compare-page-support.png").stat().st_size > 10000


PAYLOADS = [
    "<script>window.__pwned = 1; alert('script')</script>",
    "<img src=x onerror=\"window.__pwned = 2; alert('img')\">",
    "</script><script>window.__pwned = 3; alert('close')</script>",
    "<!-- <script>window.__pwned = 4</script> --> & &amp; <img src=\"http://example.invalid/x.png\">",
    "<svg onload=\"window.__pwned = 5\"></svg><iframe src=\"https://example.invalid/\"></iframe>",
]


def test_a_malicious_document_or_query_runs_nothing_and_shows_as_text(tmp_path, browser):
    corpus = {f"d{i}": text for i, text in enumerate(PAYLOADS)}
    query = "<b onmouseover=\"window.__pwned = 6\">script</b></script><script>window.__pwned = 7</script>"
    run_a = {"q1": {d: float(len(PAYLOADS) - i) for i, d in enumerate(corpus)}}
    run_b = {"q1": {d: float(i) for i, d in enumerate(corpus)}}
    qrels = {"q1": {"d0": 1, "d2": 2}}
    runs = [RunData("a<script>", run_a, {"q1": {"nDCG@10": 0.5}}, {}),
            RunData("b</script>", run_b, {"q1": {"nDCG@10": 0.25}}, {})]
    page_data = build_page("<script>window.__pwned = 8</script>", Summary("h</script>", (), "r<img src=x>"), runs,
                           [("a<script>", "b</script>")], {"q1": query}, qrels, corpus.get)
    path = tmp_path / "evil.html"
    write_page(path, page_data)
    html = path.read_text(encoding="utf-8")
    assert html.count("<script") == 2 and html.count("</script>") == 2  # the page's own two blocks only

    opened = open_page(browser, path)
    page = opened.page
    page.click("tr[data-query=q1]")
    page.select_option("#depth", "5")
    page.locator("#ranking-left li.doc").first.hover()
    assert page.evaluate("window.__pwned") is None
    assert opened.dialogs == [] and opened.errors == []
    assert opened.requests == [opened.url], opened.requests
    assert page.locator("#app img, #app svg, #app iframe, #app b").count() == 0
    texts = page.eval_on_selector_all("#ranking-left li.doc .doctext", "els => els.map(e => e.textContent)")
    assert texts == PAYLOADS
    assert page.text_content("#query-text") == query
    assert page.title() == "<script>window.__pwned = 8</script>"
    screenshot(page, "compare-page-malicious.png")


def test_a_page_from_two_runs_alone_contrasts_them_by_rbo(tmp_path, browser):
    base = tmp_path / "base.trec"
    head = tmp_path / "head.trec"
    base.write_text("q1 Q0 a 1 3 x\nq1 Q0 b 2 2 x\nq1 Q0 c 3 1 x\nq2 Q0 a 1 2 x\nq2 Q0 b 2 1 x\n")
    head.write_text("q1 Q0 a 1 3 y\nq1 Q0 b 2 2 y\nq1 Q0 c 3 1 y\nq2 Q0 b 1 2 y\nq2 Q0 a 2 1 y\n")
    write_beir(tmp_path / "data", [{"_id": d, "title": "", "text": f"text {d}"} for d in "abc"],
               [{"_id": "q1", "text": "one"}, {"_id": "q2", "text": "two"}], {})
    out = tmp_path / "page.html"
    assert run_command("page", [str(base), str(head), "--output", str(out), "--dataset", str(tmp_path / "data")]) == 0
    opened = open_page(browser, out)
    rows = _table(opened.page)
    # most different first: q2 (swapped top two: RBO 0.9, worked in test_page.py), then q1 (same order: 1)
    assert [(r["id"], r["diff"]) for r in rows] == [("q2", "0.9000"), ("q1", "1.0000")]
    # the RBO is the table's one number: no empty measure columns, and not a second RBO column (issue 51)
    assert _header(opened.page) == ["id", "text", "difference", "stratum", "cls_base", "cls_cand", "judged"]
    opened.page.click("tr[data-query=q2]")
    assert _column(opened.page, "left") == ["a", "b"] and _column(opened.page, "right") == ["b", "a"]
    assert opened.requests == [opened.url] and opened.errors == []


def test_a_query_whose_run_found_no_positive_says_so(tmp_path, browser):
    # issue 51: a judged non-relevant document at rank 1 read "not_retrieved (first positive at rank 1)"
    base, head = tmp_path / "base.trec", tmp_path / "head.trec"
    base.write_text("q1 Q0 n 1 2 x\nq1 Q0 o 2 1 x\n")  # n: judged 0; the positive p never retrieved
    head.write_text("q1 Q0 p 1 2 y\nq1 Q0 n 2 1 y\n")
    data = write_beir(tmp_path / "data", [{"_id": d, "title": "", "text": f"text {d}"} for d in "nop"],
                      [{"_id": "q1", "text": "text p"}], {"test": [("q1", "n", 0), ("q1", "p", 1)]})
    out = tmp_path / "page.html"
    assert run_command("page", [str(base), str(head), "--output", str(out), "--qrels", str(data / "qrels" / "test.tsv"),
                                "--dataset", str(data)]) == 0
    opened = open_page(browser, out)
    opened.page.click("tr[data-query=q1]")
    words = opened.page.eval_on_selector_all("#diagnosis li", "els => els.map(e => e.textContent)")
    assert words[0].startswith("base.trec: not_retrieved") and words[0].endswith("(no positive retrieved).")
    assert words[1] == "head.trec: in_top_k — a positive is in the top k (first positive at rank 1)."
    assert opened.errors == []


def test_the_browser_leaves_nothing_in_the_home_folder(tmp_path):
    """Chromium writes its crash-report settings and dconf's under the home folder by default; the tests' browser
    keeps them in a folder of its own (``browser.chromium``), so a home folder stays as it was."""
    import os
    import subprocess
    import sys

    probe = ("from browser import chromium\n"
             "with chromium() as b:\n"
             "    page = b.new_page(); page.set_content('<p>seen</p>'); assert page.inner_text('p') == 'seen'\n")
    tests = Path(__file__).resolve().parent
    require()  # skips here (fails in CI) where there is no browser: in the probe's process a skip is an error
    subprocess.run([sys.executable, "-c", probe], env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(tests)},
                   check=True, capture_output=True, timeout=120)
    assert list(tmp_path.iterdir()) == []
