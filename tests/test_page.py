"""The comparison page's data (no browser: ``test_page_browser.py`` opens the pages)."""

from __future__ import annotations

import json
import random

import pytest
from command_runner import run_command

from retrieval_lab.core.params import TokenizerParams
from retrieval_lab.page import IN_TOP_K, RunData, Summary, build_page, rbo, render, script_json
from retrieval_lab.tokenizer import Tokenizer


def rbo_by_sets(a: list[str], b: list[str], p: float) -> float:
    """Webber et al.'s eq. 32 read literally: agreement at d is |A[:d] & B[:d]| / d (equal lengths)."""
    k = len(a)
    agree = [len(set(a[:d]) & set(b[:d])) / d for d in range(1, k + 1)]
    return agree[-1] * p ** k + (1 - p) / p * sum(x * p ** d for d, x in enumerate(agree, start=1))


def test_rbo_hand_worked_values():
    assert rbo(list("abc"), list("abc")) == pytest.approx(1.0)
    assert rbo(list("abc"), list("xyz")) == 0.0
    # swapped pair: d=1 shares nothing, d=2 shares both: 0.81 + (0.1/0.9) * 0.81 = 0.9
    assert rbo(["a", "b"], ["b", "a"]) == pytest.approx(0.9)
    # a b c / a c b: agreements 1, 1/2, 1 -> 0.729 + (0.1/0.9) * (0.9 + 0.405 + 0.729) = 0.955
    assert rbo(list("abc"), list("acb")) == pytest.approx(0.955)
    assert rbo([], []) == 1.0 and rbo(["a"], []) == 0.0
    assert rbo(list("abcd"), list("ab")) == pytest.approx(1.0)  # cut to the shorter ranking


def test_rbo_equals_the_set_formula_on_random_rankings():
    rng = random.Random(3)
    for _ in range(50):
        docs = [f"d{i}" for i in range(30)]
        a, b = rng.sample(docs, 12), rng.sample(docs, 12)
        assert rbo(a, b, 0.8) == pytest.approx(rbo_by_sets(a, b, 0.8), abs=1e-12)


def test_script_json_cannot_end_its_block_and_reads_back():
    obj = {"t": "</script><!-- & <img src=x onerror=alert(1)> \u2028"}
    text = script_json(obj)
    assert not any(c in text for c in "<>&") and "\u2028" not in text
    assert json.loads(text) == obj


def _page():
    qrels = {"q1": {"d1": 2, "d2": 0, "d9": 1}, "q2": {"d3": 1}}
    run_a = {"q1": {"d1": 3.0, "d2": 2.0, "d4": 1.0}, "q2": {"d4": 2.0, "d5": 1.0, "d3": 0.5}}
    run_b = {"q1": {"d4": 3.0, "d1": 2.0}, "q2": {"d3": 1.0}}
    texts = {"d1": "Connection refused", "d2": "connect the dots", "d3": "disk full", "d4": "other",
             "d5": "x", "d9": "a connecting flight"}
    runs = [RunData("a", run_a, {"q1": {"RR": 1.0}, "q2": {"RR": 1 / 3}}, {}),
            RunData("b", run_b, {"q1": {"RR": 0.5}, "q2": {"RR": 1.0}}, {"q1": "late_rank"})]
    return build_page("t", Summary("h", (), "r"), runs, [("a", "b")], {"q1": "connecting", "q2": "the disks"},
                      qrels, texts.get, {"q1": True, "q2": False}, Tokenizer(TokenizerParams()), depth=2,
                      judged_k=2)


def test_the_page_data_of_a_hand_made_pair():
    page = _page()
    data = page.to_json()
    docs = data["docs"]["id"]
    assert len(docs) == len(set(docs))  # each document stored once
    rankings = [[[docs[i] for i in q] for q in run] for run in data["rankings"]]
    assert rankings == [[["d1", "d2"], ["d4", "d5"]], [["d4", "d1"], ["d3"]]]  # cut to depth 2
    assert data["depth"] == 2
    assert [[docs[d], g] for d, g in data["qrels"][0]] == [["d1", 2], ["d9", 1], ["d2", 0]]
    # ranks of q1's judged documents in the whole run (graded order: d1, d9, d2), not only the stored depth
    assert data["judged_ranks"][0] == [[1, None, 2], [3]]
    assert data["judged_ranks"][1] == [[2, None, None], [1]]
    assert data["judged"] == [[1.0, 0.0], [0.5, 0.5]]  # share of the top 2 with a judgment
    assert data["values"] == [{"RR": [1.0, 1 / 3]}, {"RR": [0.5, 1.0]}]
    assert data["classes"] == [[IN_TOP_K, IN_TOP_K], ["late_rank", IN_TOP_K]]
    assert data["queries"]["stratum"] == ["seen", "unseen"]
    assert data["rbo"][0] == [pytest.approx(rbo(["d1", "d2", "d4"], ["d4", "d1"])),
                              pytest.approx(rbo(["d4", "d5", "d3"], ["d3"]))]
    # stemmed matches of the query's words, stopwords left out
    assert data["queries"]["terms"] == [["connect", "connecting", "connection"], ["disk", "disks"]]
    assert data["measures"] == ["RR"]


def test_the_html_holds_its_script_by_hash_and_requests_nothing():
    html = render(_page())
    csp = html.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0]
    assert csp.startswith("default-src 'none'; script-src 'sha256-")
    assert "http://" not in html and "https://" not in html and " src=" not in html


def test_compare_html_needs_its_inputs_and_writes_nothing_without_them(tmp_path, capsys):
    out, dataset = tmp_path / "out", tmp_path / "dataset"
    dataset.mkdir()
    code = run_command("compare", ["--reports-root", str(tmp_path), "--output", f"{out}.json",
                                   "--markdown", f"{out}.md", "--html", f"{out}.html", "--dataset", str(dataset)])
    assert code == 2 and "--html needs --runs-root, --qrels" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [dataset]


def test_page_command_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "a.trec"
    run.write_text("q1 Q0 d1 1 1.0 x\n")
    out = tmp_path / "page.html"
    assert run_command("page", [str(run), str(run), "--output", str(out), "--depth", "0"]) == 2
    assert "field '--depth': expected a depth >= 1, got 0" in capsys.readouterr().err
    assert run_command("page", [str(run), str(run), "--output", str(run)]) == 2
    assert "an output never replaces, holds or lies inside an input" in capsys.readouterr().err
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 nan x\n")
    assert run_command("page", [str(run), str(bad), "--output", str(out)]) == 2
    assert "bad.trec:1 field 'score'" in capsys.readouterr().err
    assert not out.exists() and run.read_text() == "q1 Q0 d1 1 1.0 x\n"


def test_page_with_qrels_and_dataset_shows_texts_grades_and_classes(tmp_path, capsys):
    """The documented main mode (issue 51: it raised TypeError, 'Diagnosis' object is not subscriptable)."""
    from beir_fixtures import write_beir

    import retrieval_lab as rl

    corpus = [{"_id": "d1", "title": "printer", "text": "printer jam fix"},
              {"_id": "d2", "title": "wifi", "text": "wireless network drops"},
              {"_id": "d3", "title": "mail", "text": "email quota full"}]
    queries = [{"_id": "q1", "text": "printer jammed"}, {"_id": "q2", "text": "wifi drops"}]
    data = write_beir(tmp_path / "col", corpus, queries, {"test": [("q1", "d1", 1), ("q2", "d2", 2)]})
    base, head = tmp_path / "base.trec", tmp_path / "head.trec"
    base.write_text("q1 Q0 d3 1 2.0 b\nq1 Q0 d1 2 1.0 b\nq2 Q0 d3 1 1.0 b\n")  # q2 never finds d2
    head.write_text("q1 Q0 d1 1 2.0 h\nq2 Q0 d2 1 1.0 h\n")
    out = tmp_path / "page.html"
    argv = [str(base), str(head), "--output", str(out), "--qrels", str(data / "qrels" / "test.tsv"),
            "--dataset", str(data), "-m", "RR@1", "--depth", "2"]
    assert run_command("page", argv) == 0, capsys.readouterr().err
    html = out.read_text(encoding="utf-8")
    page = json.loads(html.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert page["queries"]["text"] == ["printer jammed", "wifi drops"]
    assert "printer jam fix" in " ".join(page["docs"]["text"])
    # the classes are the library's own diagnosis at diagnose k (10): q1 has its positive at rank 2 in
    # base (in the top k), q2 none; head ranks both first
    col = rl.load_beir(data)
    found = rl.diagnose(col.qrels["test"], rl.read_run(base), col.queries, col.corpus, k=10)
    assert [f.query for f in found.failures] == ["q2"]
    assert page["classes"][0] == [IN_TOP_K, found.failures[0].cls]
    assert page["classes"][1] == [IN_TOP_K, IN_TOP_K]
    assert page["values"][0]["RR@1"] == [0.0, 0.0] and page["values"][1]["RR@1"] == [1.0, 1.0]
    assert page["qrels"][1][0][1] == 2  # q2's grade


def test_the_page_says_which_family_its_intervals_belong_to(tmp_path, capsys):
    # issue 51: the page's default family (three measures) gave other intervals than compare-runs without saying so
    from beir_fixtures import write_beir

    data = write_beir(tmp_path / "col", [{"_id": f"d{i}", "title": "", "text": f"w{i}"} for i in range(4)],
                      [{"_id": f"q{i}", "text": f"w{i}"} for i in range(4)],
                      {"test": [(f"q{i}", f"d{i}", 1) for i in range(4)]})
    base, head = tmp_path / "base.trec", tmp_path / "head.trec"
    base.write_text("".join(f"q{i} Q0 d{(i + 1) % 4} 1 2 b\nq{i} Q0 d{i} 2 1 b\n" for i in range(4)))
    head.write_text("".join(f"q{i} Q0 d{i} 1 2 h\n" for i in range(4)))
    out = tmp_path / "page.html"
    qrels = str(data / "qrels" / "test.tsv")
    assert run_command("page", [str(base), str(head), "--output", str(out), "--qrels", qrels]) == 0
    page = json.loads(out.read_text(encoding="utf-8").split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert ("The intervals are simultaneous across these 3 measures: `compare-runs` with the same measures "
            "(-m nDCG@10 -m R@100 -m RR@10) gives the same intervals") in " ".join(page["summary"]["notes"])
    capsys.readouterr()
    assert run_command("compare-runs", [qrels, str(base), str(head), "-m", "nDCG@10", "-m", "R@100", "-m", "RR@10",
                                        "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    for row, m in zip(page["summary"]["rows"], ("nDCG@10", "R@100", "RR@10")):
        assert row["measure"] == m and row["cells"][4] == f"[{ours['measures'][m]['ci_low']:+.4f}, " \
                                                            f"{ours['measures'][m]['ci_high']:+.4f}]"


def test_runs_the_page_cannot_contrast_are_refused_naming_their_files(tmp_path, capsys):
    # a newcomer's try: two runs of different collections made a page of 228 queries with no warning (compare-runs
    # refuses them); qrels of another collection named an internal field ('base_run') instead of the files
    base, head, other = tmp_path / "base.trec", tmp_path / "head.trec", tmp_path / "other.trec"
    base.write_text("q1 Q0 d1 1 1.0 b\n")
    head.write_text("q1 Q0 d2 1 1.0 h\n")
    other.write_text("x9 Q0 d1 1 1.0 o\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nz1\td1\t1\n")
    out = tmp_path / "page.html"
    assert run_command("page", [str(base), str(other), "--output", str(out)]) == 2
    assert f"{base}: shares no query with {other}: two runs of different query sets" in capsys.readouterr().err
    assert run_command("page", [str(base), str(head), "--output", str(out), "--qrels", str(qrels)]) == 2
    err = capsys.readouterr().err
    assert str(base) in err and str(qrels) in err and "base_run" not in err
    assert not out.exists()
