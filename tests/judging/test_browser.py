"""The judging page in a real browser (headless Debian Chromium, ``browser.py``), over a pool of the support
corpus: two assessors label it with the keyboard in two tabs at once, one reloads and resumes, their agreement
is scikit-learn's, the disagreements are adjudicated in the page and the export is the expected qrels byte for
byte; a document written to attack the page runs nothing; the docs' screenshot is made here."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from beir_fixtures import REPO
from browser import TIMEOUT_MS, chromium, screenshot
from command_runner import run_command
from judge_fixtures import Assessor

from retrieval_lab.core.data import Doc, read_corpus, read_queries
from retrieval_lab.core.params import Params
from retrieval_lab.judging import open_session, read_pool
from retrieval_lab.judging.server import start
from retrieval_lab.judgment_pool import pool, write_pool
from retrieval_lab.runs import read_run, write_run

QUERIES = ("q001", "q002", "q003")
XSS = "d000-xss"
XSS_TITLE = '<img src="x" onerror="window.__pwned = 1"> restore'
XSS_TEXT = ("</textarea><script>window.__pwned = 2</script><svg onload=\"window.__pwned = 3\"></svg> "
            "<a href=\"javascript:window.__pwned = 4\">database</a> &amp; &lt; <!-- restore -->")
DOCS_SCREENSHOT = REPO / "docs" / "judging.png"
WRITE_DOCS_SCREENSHOT = "RETRIEVAL_LAB_DOCS_SCREENSHOT"  # set to 1: the test also replaces docs/judging.png


@pytest.fixture(scope="module")
def support(tmp_path_factory) -> Path:
    """A pool of the support corpus: the top 2 of BM25 with and without stemming on three queries, and a
    document written to attack the page ranked first for the first query."""
    root = tmp_path_factory.mktemp("judge-support")
    assert run_command("generate", ["--output", str(root / "raw")]) == 0
    for name, extra in (("bm25", []), ("bm25-unstemmed", ["--set", "tokenizer.stemmer=null"])):
        assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(root / "raw"),
                                        "--output", str(root / f"{name}.trec"), *extra]) == 0
    queries = read_queries(root / "raw" / "queries.jsonl")
    corpus = read_corpus(root / "raw" / "corpus.jsonl")
    corpus[XSS] = Doc(XSS, XSS_TITLE, XSS_TEXT)
    with open(root / "raw" / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": XSS, "title": XSS_TITLE, "text": XSS_TEXT}) + "\n")
    runs = {}
    for name in ("bm25", "bm25-unstemmed"):
        run = {q: read_run(root / f"{name}.trec")[q] for q in QUERIES}
        if name == "bm25":
            run[QUERIES[0]] = {XSS: 100.0, **run[QUERIES[0]]}
        write_run(root / f"{name}.trec", run, name)
        runs[name] = run
    write_pool(root / "pool.tsv", pool(runs, 2, {q: queries[q] for q in QUERIES}, corpus))
    return root


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _open(context, url: str, opened: dict):
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("request", lambda r: opened["requests"].append(r.url))
    page.on("dialog", lambda d: (opened["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: opened["errors"].append(str(e)))
    page.goto(url)
    return page


def _wait_progress(page, labelled: int, total: int) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#progress")).to_have_text(re.compile(rf"^{labelled} of {total} labelled"))


def _shown(page) -> tuple[str, str]:
    from playwright.sync_api import expect

    expect(page.locator("#doc-text")).to_be_visible()
    query = page.locator(".query .what").text_content().removeprefix("Query ")
    return query, page.locator(".doc .what").text_content().removeprefix("Document ")


def test_two_assessors_judge_adjudicate_and_export_in_the_browser(support, browser, tmp_path):
    from playwright.sync_api import expect
    from sklearn.metrics import cohen_kappa_score

    pairs = read_pool(support / "pool.tsv").pairs
    n = len(pairs)
    assert pairs[0] == (QUERIES[0], XSS) and n >= 8
    alice = [i % 3 for i in range(n)]
    bob = [x if i % 4 else (x + 1) % 3 for i, x in enumerate(alice)]  # every fourth pair labelled otherwise
    disputed = [i for i in range(n) if alice[i] != bob[i]]
    decided = {i: (alice[i] + bob[i]) % 3 for i in disputed}  # the adjudicator's call
    db = tmp_path / "judgments.sqlite"
    session = open_session(support / "pool.tsv", db, Params(), dataset=support / "raw", assessors=["alice", "bob"],
                           base=support / "bm25.trec", head=support / "bm25-unstemmed.trec", measure="nDCG@2")
    server = start(session)
    opened = {"requests": [], "dialogs": [], "errors": []}
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    try:
        tab_a = _open(context, server.url + "?assessor=alice", opened)
        tab_b = _open(context, server.url + "?assessor=bob", opened)  # a second tab, writing at the same time

        # the attacking document is shown as the text it is, and runs nothing
        assert _shown(tab_a) == pairs[0]
        assert tab_a.locator("#doc-title").text_content() == XSS_TITLE
        assert tab_a.locator("#doc-text").text_content() == XSS_TEXT
        assert tab_a.locator(".doc img, .doc script, .doc svg, .doc a").count() == 0
        assert tab_a.locator("#doc-title mark").all_text_contents() == ["restore"]  # the query's word, a stem match
        assert tab_a.locator("#query-text mark").count() >= 1

        # alice: label, skip the third pair, label on, reload halfway, resume, then the skipped pair comes back
        steps = [("key", str(alice[0]), 0), ("key", str(alice[1]), 1), ("key", "s", 2)]
        steps += [("key", str(alice[i]), i) for i in range(3, n)] + [("key", str(alice[2]), 2)]
        half = 5  # steps done before the reload
        for _, key, _ in steps[:half]:
            tab_a.keyboard.press(key)
        _wait_progress(tab_a, half - 1, n)  # the skip labels nothing
        tab_a.reload()
        _wait_progress(tab_a, half - 1, n)
        assert _shown(tab_a) == pairs[half]  # resumed where alice stopped, past the skipped pair
        screenshot_path = screenshot(tab_a, "judging.png")
        # bob: a label taken back and typed again, then his labels while alice's tab writes too
        tab_b.keyboard.press(str((bob[0] + 1) % 3))
        _wait_progress(tab_b, 1, n)
        tab_b.keyboard.press("u")
        _wait_progress(tab_b, 0, n)
        for i, (_, key, _) in enumerate(steps[half:]):
            tab_a.keyboard.press(key)
            if i < n:
                tab_b.keyboard.press(str(bob[i]))
        for i in range(len(steps) - half, n):
            tab_b.keyboard.press(str(bob[i]))
        _wait_progress(tab_a, n, n)
        _wait_progress(tab_b, n, n)
        expect(tab_a.locator("#done")).to_be_visible()

        # every label of both tabs is in force: nothing lost
        state = session.store.state()
        assert {p: state.labels[("alice", *p)].label for p in pairs} == dict(zip(pairs, alice))
        assert {p: state.labels[("bob", *p)].label for p in pairs} == dict(zip(pairs, bob))

        # agreement: scikit-learn's kappa, in the page and in the API
        expected = cohen_kappa_score(alice, bob)
        tab_a.click("#tab-agreement")
        expect(tab_a.locator("#agreement-summary")).to_contain_text(f"Cohen's κ {expected:.3f} over {n} pairs")
        api = Assessor(server.url, "alice", server.csrf).get("api/agreement")
        assert api["kappa"]["name"] == "cohen" and api["kappa"]["value"] == pytest.approx(expected, abs=1e-12)
        assert [(d["query_id"], d["doc_id"]) for d in api["disagreements"]] == [pairs[i] for i in disputed]

        # adjudication in the page, as carol
        tab_b.goto(server.url + "?assessor=carol&tab=adjudicate")
        for i in disputed:
            row = tab_b.locator("#disagreements tbody tr").filter(has_text=pairs[i][0]).filter(has_text=pairs[i][1])
            row.locator(f'button[data-label="{decided[i]}"]').click()
            expect(tab_b.locator("#disagreements tbody tr").filter(has_text=pairs[i][0])
                   .filter(has_text=pairs[i][1]).locator(".decision")).to_have_text(f"{decided[i]} (carol)")

        # the judgments that matter: the comparison's table renders
        tab_a.click("#tab-sensitivity")
        expect(tab_a.locator("#standings tbody tr")).to_have_count(6)
    finally:
        context.close()
        server.shutdown()
        server.server_close()

    assert opened["dialogs"] == [] and opened["errors"] == []
    assert all(url.startswith(server.origin + "/") for url in opened["requests"]), opened["requests"]
    export = tmp_path / "qrels.tsv"
    assert run_command("judge", ["--db", str(db), "--export", str(export)]) == 0
    final = [decided.get(i, alice[i]) for i in range(n)]
    assert export.read_bytes() == ("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{label}\n" for (q, d), label in zip(pairs, final))).encode("utf-8")
    assert screenshot_path.stat().st_size > 10_000
    if os.environ.get(WRITE_DOCS_SCREENSHOT) == "1":
        shutil.copyfile(screenshot_path, DOCS_SCREENSHOT)
