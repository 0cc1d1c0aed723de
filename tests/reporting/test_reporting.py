"""``retrieval-lab report`` and its gate, through real git revisions and the DVC cache.

A scratch repository (module fixture, a few seconds) holds a tiny BEIR dataset, two run
files and a dvc.yaml with one evaluate stage per run. Three revisions:

``main``       the base: every query's positive at rank 1 of ``bm25``, ties among the rest;
``regressed``  ``bm25`` with the positive pushed to rank 15 for 12 of the 40 queries (30%);
``ties``       ``bm25`` rewritten with tied documents in another order (ranks renumbered).

``dense`` is the same at every revision. Per-query results come from the DVC cache at
each revision (``dvc.api``), the metrics diff from ``dvc metrics diff``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from beir_fixtures import write_beir
from pipeline_fixtures import sh

from retrieval_lab.cli import main
from retrieval_lab.reporting.gather import changed_fields, is_measure_field
from retrieval_lab.reporting.judge import unjudged
from retrieval_lab.reporting.render import verdict_line

QUERIES = 40
REGRESSED = list(range(0, 36, 3))  # q00, q03, ..., q33: 12 / 40 = 30% of the queries
DISTRACTOR_SCORES = [5, 5, 5, 5, 4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1]  # ties everywhere


def _dataset(root: Path) -> None:
    # even queries share two tokens with their positive (a late positive is "late_rank"),
    # odd ones share none (a late positive is a "vocabulary_gap")
    corpus = [{"_id": f"p{i}", "title": "", "text": f"topic{i} alpha{i} procedure"} for i in range(QUERIES)]
    corpus += [{"_id": f"x{j:02d}", "title": "", "text": f"generic filler page number{j}"} for j in range(60)]
    queries = [{"_id": f"q{i:02d}", "text": f"topic{i} alpha{i}" if i % 2 == 0 else f"zeta{i} omega"}
               for i in range(QUERIES)]
    write_beir(root, corpus, queries, {"test": [(f"q{i:02d}", f"p{i}", 1) for i in range(QUERIES)]})


def _run(positive_score: dict[int, float]) -> dict[str, dict[str, float]]:
    run = {}
    for i in range(QUERIES):
        docs = {f"x{(i + k) % 60:02d}": float(s) for k, s in enumerate(DISTRACTOR_SCORES)}
        docs[f"p{i}"] = positive_score.get(i, 10.0)
        run[f"q{i:02d}"] = docs
    return run


def _write_run(path: Path, run: dict, reverse_ties: bool = False) -> None:
    """TREC lines by score, tied documents by id descending, or ascending with ``reverse_ties``."""
    lines = []
    for qid, docs in run.items():
        by_id = sorted(docs.items(), reverse=not reverse_ties)
        order = sorted(by_id, key=lambda x: -x[1])  # stable: ties keep the id order
        lines += [f"{qid} Q0 {d} {rank} {s} run\n" for rank, (d, s) in enumerate(order, start=1)]
    path.write_text("".join(lines))


def _dvc_yaml() -> dict:
    stages = {}
    for name in ("bm25", "dense"):
        reports = f"reports/toy/{name}"
        stages[f"evaluate-{name}"] = {
            "cmd": (f'"{sys.executable}" -m retrieval_lab.cli evaluate --dataset data/toy --split test '
                    f"--run runs/toy/{name}.trec --metrics metrics/toy/{name}.json --reports {reports}"),
            "deps": ["data/toy", f"runs/toy/{name}.trec"],
            "params": ["evaluate", "retrieve"],
            "outs": [f"{reports}/per_query.json", f"{reports}/diagnosis.json",
                     *({f"{reports}/{f}": {"cache": False}} for f in ("diagnosis.md", "recall_curve.csv",
                                                                      "first_positive_ranks.csv",
                                                                      "first_positive_hist.csv"))],
            "metrics": [{f"metrics/toy/{name}.json": {"cache": False}}],
        }
    return {"stages": stages}


PARAMS = {"dataset": "toy", "retrieve": {"depth": 20},
          "evaluate": {"measures": ["nDCG@10", "R@100", "RR@10", "Judged@10"], "permutations": 4000, "seed": 5},
          "compare": {"pairs": [["dense", "bm25"]], "measure": "nDCG@10", "key_measures": ["R@100", "RR@10"]},
          "train": {"variants": {}}}


def _commit(repo: Path, message: str) -> None:
    sh(["dvc", "repro", "-q"], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", message], repo)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("gate") / "repo"
    repo.mkdir()
    sh(["git", "init", "-q", "-b", "main"], repo)
    sh(["dvc", "init", "-q"], repo)
    _dataset(repo / "data" / "toy")
    (repo / "runs" / "toy").mkdir(parents=True)
    _write_run(repo / "runs" / "toy" / "bm25.trec", _run({}))
    _write_run(repo / "runs" / "toy" / "dense.trec", _run({i: 4.5 for i in range(0, QUERIES, 5)}))
    (repo / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    (repo / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml(), sort_keys=False))
    _commit(repo, "base")

    sh(["git", "checkout", "-q", "-b", "regressed"], repo)
    _write_run(repo / "runs" / "toy" / "bm25.trec", _run({i: 1.5 for i in REGRESSED}))  # 14 docs score >= 2
    _commit(repo, "bm25: positives below rank 10 for 30% of queries")

    sh(["git", "checkout", "-q", "main"], repo)
    sh(["dvc", "checkout", "-q"], repo)
    sh(["git", "checkout", "-q", "-b", "ties"], repo)
    _write_run(repo / "runs" / "toy" / "bm25.trec", _run({}), reverse_ties=True)
    _commit(repo, "bm25: tied documents in another order")
    return repo


def _report(repo: Path, out: Path, head: str, *extra: str) -> tuple[int, str]:
    code = main(["report", "--base", "main", "--head", head, "--repo", str(repo), "--output", str(out),
                 "--params", str(repo / "params.yaml"), *extra])
    return code, (out / "report.md").read_text()


def test_the_tie_revision_really_only_reorders_tied_scores(repo):
    base = sh(["git", "show", "main:runs/toy/bm25.trec"], repo).stdout.splitlines()
    ties = sh(["git", "show", "ties:runs/toy/bm25.trec"], repo).stdout.splitlines()
    assert base != ties  # another file ...
    def triples(lines):
        return sorted((x.split()[0], x.split()[2], x.split()[4]) for x in lines)

    assert triples(base) == triples(ties)  # ... with the same (query, document, score) triples
    assert [x.split()[2] for x in base[:5]] != [x.split()[2] for x in ties[:5]]  # tied docs listed differently


def test_gate_fails_on_a_planted_regression(repo, tmp_path, capsys):
    code, report = _report(repo, tmp_path / "pr", "regressed", "--fail-on-regression")
    assert code == 1
    first = report.splitlines()[0]
    assert first.startswith("**Regression**: 2 measure(s) with the whole interval below 0:")
    # nDCG@10 and RR@10: 12 of 40 queries fall from 1 (positive at rank 1) to 0: -12/40 = -0.3 exactly
    assert "bm25 nDCG@10 -0.3000 [" in first and "bm25 RR@10 -0.3000 [" in first
    assert "Crossed: bm25 nDCG@10, bm25 RR@10." in report
    assert "Unchanged (identical per-query results): dense." in report
    row = next(line for line in report.splitlines() if line.startswith("| bm25 | 40 |"))
    assert "1.0000 → 0.7000<br>**-0.3000**" in row  # nDCG@10 base 1, head 28/40
    assert "1.0000 → 1.0000<br>+0.0000 [+0.0000, +0.0000]" in row  # R@100: still found at rank 15
    assert row.endswith("| worse on nDCG@10, RR@10 |")
    # one changed retriever x three key measures, but nDCG@10 and RR@10 have the same per-query values (1 -> 0
    # on the same 12 queries): the same test, counted once, so two comparisons at 97.5% each
    assert ("95% simultaneous intervals across the 2 distinct comparisons of the gate's family, the changed gated "
            "retrievers times the gated measures (Bonferroni: 97.50% each)") in report
    out = capsys.readouterr().out
    assert "REGRESSION: bm25 nDCG@10 -0.3000" in out
    # what broke: the 12 losers by the head run's diagnosis; queries 0, 3, 6, ... 33: even ones share
    # tokens with their positive (late_rank: 0, 6, 12, 18, 24, 30), odd ones share none (vocabulary_gap)
    assert "### bm25: 12 queries lost, 0 gained" in report
    assert "| late_rank | 6 | 0 |" in report and "| vocabulary_gap | 6 | 0 |" in report
    assert "| late_rank | q06 | 1.000 → 0.000 (-1.000) | 1 → 15 |" in report
    assert "| vocabulary_gap | q03 | 1.000 → 0.000 (-1.000) | 1 → 15 |" in report
    # metrics diff last, collapsed, measures only; bookkeeping apart
    details = report[report.rindex("<details>"):]
    assert "| metrics/toy/bm25.json | nDCG@10 | 1.0000 | 0.7000 | -0.3000 |" in details
    assert "| metrics/toy/bm25.json | failures_diagnosed | 0 | 12 | 12 |" in details.split("Bookkeeping")[1]
    assert "R@100" not in details and "dense.json" not in details  # unchanged values are left out
    assert (tmp_path / "pr" / "recall_bm25.png").stat().st_size > 5_000


def test_tolerance_lets_a_small_enough_loss_through(repo, tmp_path):
    # the RR@10 / nDCG@10 intervals lie around -0.3 +- 0.2 (40 queries, 98.33% each): a 0.6 tolerance passes
    code, report = _report(repo, tmp_path / "pr", "regressed", "--fail-on-regression", "--tolerance", "0.6")
    assert code == 0
    assert report.startswith("**Mixed, within tolerance** (1 of 2 retrievers changed): worse, within the "
                             "tolerance 0.6: bm25 nDCG@10 -0.3000 [")
    assert "Crossed: none." in report


def test_gate_passes_when_only_tied_scores_are_reordered(repo, tmp_path):
    code, report = _report(repo, tmp_path / "pr", "ties", "--fail-on-regression")
    assert code == 0
    assert report.splitlines()[0] == ("**No change**: all 2 retrievers have identical per-query results at "
                                      "both revisions.")
    assert "Unchanged (identical per-query results): bm25, dense." in report
    assert "No measure changed." in report


def test_report_without_the_flag_never_fails(repo, tmp_path):
    assert _report(repo, tmp_path / "pr", "regressed")[0] == 0


def test_fields_that_are_measures_and_fields_that_are_bookkeeping():
    assert all(is_measure_field(f) for f in ("nDCG@10", "val.R@100", "train.loss", "RR", "AP"))
    assert not any(is_measure_field(f) for f in ("depth", "not_found_rank", "run_queries_not_in_qrels",
                                                 "queries_evaluated", "train.lr", "step", "judged_warning"))
    metrics = {"metrics/s/bm25.json": ({"nDCG@10": 0.5, "R@100": 0.9, "depth": 100},
                                       {"nDCG@10": 0.6, "R@100": 0.9, "depth": 120}),
               "metrics/s/compare.json": ({"pairs.a vs b.ci_low": 0.1}, {"pairs.a vs b.ci_low": 0.2})}
    measures, bookkeeping = changed_fields(metrics)
    assert measures == [("metrics/s/bm25.json", "nDCG@10", 0.5, 0.6, 0.6 - 0.5)]
    assert bookkeeping == [("metrics/s/bm25.json", "depth", 100, 120, 20)]


def test_verdict_lines():
    row = {"mean_difference": 0.02, "ci_low": 0.01, "ci_high": 0.03}
    assert verdict_line(1, 3, [], [], [("a", "nDCG@10", row)], 0.0) == (
        "**Improvement** (1 of 3 retrievers changed): better: a nDCG@10 +0.0200 [+0.0100, +0.0300].")
    assert verdict_line(2, 3, [], [], [], 0.0) == (
        "**No significant change**: 2 of 3 retrievers changed, and no simultaneous interval of the gated ones "
        "excludes 0.")
    # a newcomer's try: the line said "no significant change" while the not-gated table showed a real loss
    from retrieval_lab.comparison import compare_family

    (lost,) = compare_family([({f"q{i}": 1.0 for i in range(20)}, {f"q{i}": 0.0 for i in range(20)})], 0.95, 500, 1)
    assert verdict_line(2, 3, [], [], [], 0.0, reported=[("fr", "nDCG@10", lost)]) == (
        "**No significant change**: 2 of 3 retrievers changed, and no simultaneous interval of the gated ones "
        f"excludes 0. Not gated (not in gate.retrievers): fr nDCG@10 -1.0000 [{lost.test.low:+.4f}, "
        f"{lost.test.high:+.4f}].")


def test_bad_inputs_are_clear_errors(repo, tmp_path, capsys):
    assert main(["report", "--base", "main", "--head", "regressed", "--repo", str(repo), "--output",
                 str(tmp_path / "pr"), "--params", str(repo / "params.yaml"), "--tolerance", "-1"]) == 2
    assert "tolerance must be a finite number >= 0" in capsys.readouterr().err
    params = dict(PARAMS, compare={**PARAMS["compare"], "key_measures": ["AP@5"]})
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    # a gated measure the per-query results lack matches nothing: the gate cannot judge, naming it (issue 52)
    assert main(["report", "--base", "main", "--head", "regressed", "--repo", str(repo), "--output",
                 str(tmp_path / "pr"), "--params", str(tmp_path / "p.yaml"), "--fail-on-regression"]) == 3
    out = capsys.readouterr().out
    assert "CANNOT JUDGE: bm25: the gated measures are not in its per-query results: AP@5 at main (40 of 40" in out
    assert "CANNOT JUDGE: dense: the gated measures are not in its per-query results: AP@5 at main" in out


# ----------------------------------------------------------------------------- a gate that cannot see fails closed


def _workspace_copy(repo: Path, tmp_path: Path, branch: str) -> Path:
    """A copy of the scratch repository (with its DVC cache) with ``branch``'s outputs checked out."""
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    sh(["git", "checkout", "-q", branch], copy)
    sh(["dvc", "checkout", "-q", "--force"], copy)
    return copy


def _report_workspace(copy: Path, out: Path, *extra: str) -> tuple[int, list[str]]:
    code = main(["report", "--base", "main", "--repo", str(copy), "--output", str(out),
                 "--params", str(copy / "params.yaml"), "--fail-on-regression", *extra])
    return code, (out / "report.md").read_text().splitlines()


def test_gate_cannot_judge_stale_per_query_results_while_the_metrics_changed(repo, tmp_path, capsys):
    # the case: the workspace holds the regressed branch's metrics (git) but the base's
    # per_query.json (a pull that fell back on another revision's outputs)
    copy = _workspace_copy(repo, tmp_path, "regressed")
    per_query = copy / "reports" / "toy" / "bm25" / "per_query.json"
    per_query.write_text(_read_at_main(copy, "reports/toy/bm25/per_query.json"))
    code, lines = _report_workspace(copy, tmp_path / "pr")
    assert code == 3
    # nDCG@10 and RR@10: 28/40 = 0.7; Judged@10: 1 judged document in the top 10 for 28 queries = 0.07
    assert lines[0] == ("**Cannot judge**: bm25: per-query results identical but metrics/toy/bm25.json changed "
                        "(Judged@10 0.1000 → 0.0700, RR@10 1.0000 → 0.7000, nDCG@10 1.0000 → 0.7000).")
    assert "Crossed: none. Cannot judge: bm25." in "\n".join(lines)
    assert "CANNOT JUDGE: bm25: per-query results identical" in capsys.readouterr().out


def _read_at_main(copy: Path, path: str) -> str:
    from retrieval_lab.reporting.gather import read_at

    text = read_at(path, "main", str(copy))
    assert text is not None
    return text


def test_gate_cannot_judge_a_retriever_missing_at_head(repo, tmp_path):
    # `dvc pull --allow-missing` left dense's per_query.json out: only bm25 (reordered ties) is seen
    copy = _workspace_copy(repo, tmp_path, "ties")
    (copy / "reports" / "toy" / "dense" / "per_query.json").unlink()
    code, lines = _report_workspace(copy, tmp_path / "pr")
    assert code == 3
    assert lines[0] == "**Cannot judge**: dense: per-query results missing at head."
    assert "Missing at head (not compared): dense." in lines
    # a regression seen still fails as a regression (exit 1), and the blind spot is named on line 2
    copy2 = _workspace_copy(repo, tmp_path / "b", "regressed")
    (copy2 / "reports" / "toy" / "dense" / "per_query.json").unlink()
    code, lines = _report_workspace(copy2, tmp_path / "pr2")
    assert code == 1
    assert lines[0].startswith("**Regression**: 2 measure(s)")
    assert lines[1] == "**Cannot judge**: dense: per-query results missing at head."
    # without the flag the report still never fails
    assert main(["report", "--base", "main", "--repo", str(copy), "--output", str(tmp_path / "pr3"),
                 "--params", str(copy / "params.yaml")]) == 0


def test_unjudged_covers_an_empty_report_and_retrievers_on_one_side():
    from retrieval_lab.reporting.gather import Retriever

    assert unjudged([], ["nDCG@10"], [], "toy") == [
        ("(all)", "no per-query results found under reports/toy/ at either revision")]
    q, means = {"q1": {"measures": {"nDCG@10": 1.0}}}, {"nDCG@10": 1.0}
    found = [Retriever("new", ("b", "h"), None, q, means=(None, means)),
             Retriever("gone", ("b", "h"), q, None, means=(means, None)),
             Retriever("same", ("b", "h"), q, q, means=(means, means)), Retriever("nowhere", ("b", "h"), None, None)]
    assert unjudged(found, ["nDCG@10"], [], "toy") == [
        ("new", "per-query results missing at base"), ("gone", "per-query results missing at head"),
        ("nowhere", "per-query results missing at both revisions")]


def test_a_measure_with_too_few_queries_for_a_bounded_interval_cannot_be_judged():
    # nDCG@10 falls from 1 to 0 on each of 3 queries: the smallest two-sided p of a sign-flip test on
    # 3 queries is 2/8 = 0.25 > 0.05, so the 95% interval is (-inf, +inf) and no loss can be shown:
    # the gate must fail closed (exit 3), not pass. On 40 such queries the interval is bounded.
    from retrieval_lab.comparison import compare_family
    from retrieval_lab.reporting.gather import Retriever

    def retriever(name, n):
        base = {f"q{i}": {"measures": {"nDCG@10": 1.0}} for i in range(n)}
        head = {f"q{i}": {"measures": {"nDCG@10": 0.0}} for i in range(n)}
        (row,) = compare_family([({q: 1.0 for q in base}, {q: 0.0 for q in head})], 0.95, 2000, 1)
        return Retriever(name, ("b", "h"), base, head, {"nDCG@10": row}, ({"nDCG@10": 1.0}, {"nDCG@10": 0.0}))

    few, many = retriever("few", 3), retriever("many", 40)
    assert few.stats["nDCG@10"].test.high == float("inf") and many.stats["nDCG@10"].test.high < 0
    why = ("too few queries to judge nDCG@10 (3 queries): the interval is unbounded, so not even a loss on "
           "every query could be told from noise")
    assert unjudged([few, many], ["nDCG@10"], [], "toy") == [("few", why)]


@pytest.mark.parametrize("extra, message", [
    (["--tolerance", "nan"], "--tolerance': tolerance must be a finite number >= 0, got nan"),
    (["--tolerance", "inf"], "--tolerance': tolerance must be a finite number >= 0, got inf"),
    (["--base", "no-such-branch"], "field '--base': no such git revision 'no-such-branch'"),
    (["--head", "no-such-branch"], "field '--head': no such git revision 'no-such-branch'"),
])
def test_a_gate_switched_off_or_pointed_nowhere_is_a_clear_error(repo, tmp_path, capsys, extra, message):
    argv = ["report", "--base", "main", "--head", "regressed", "--repo", str(repo), "--output",
            str(tmp_path / "pr"), "--params", str(repo / "params.yaml"), "--fail-on-regression"]
    assert main(argv + extra) == 2  # later options win in argparse
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "pr").exists()  # nothing written


def test_strata_comparisons_split_seen_from_unseen_in_a_family_of_their_own():
    from retrieval_lab.reporting.gather import Retriever
    from retrieval_lab.reporting.judge import strata_comparisons

    def entries(values, seen):
        return {f"q{i}": {"measures": {"nDCG@10": v}, "seen": i in seen} for i, v in enumerate(values)}

    # seen q0..q2 gain 0.25 each; unseen q3..q5 lose 0.125, 0, 0.125 -> mean -1/12
    base = entries([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], {0, 1, 2})
    head = entries([0.75, 0.75, 0.75, 0.375, 0.5, 0.375], {0, 1, 2})
    changed = Retriever("ft", ("b", "h"), base, head)
    one_sided = Retriever("bm25", ("b", "h"), entries([0.5, 0.6], set()), entries([0.6, 0.6], set()))
    rows, header = strata_comparisons([changed, one_sided], "nDCG@10", 0.95, 2000, 5)
    assert [(n, s, r["queries"]) for n, s, r in rows] == [("ft", "seen", 3), ("ft", "unseen", 3)]
    assert rows[0][2]["mean_difference"] == pytest.approx(0.25)
    assert rows[1][2]["mean_difference"] == pytest.approx(-0.25 / 3)
    assert header["family_size"] == 2  # bm25 has no seen query: nothing to split, not in the family
    assert strata_comparisons([one_sided], "nDCG@10", 0.95, 2000, 5) == ([], None)


def test_the_report_page_shows_the_gate_and_each_revisions_ranking(repo, tmp_path):
    from browser import chromium, open_page, screenshot

    from retrieval_lab.runs import ranked, read_run

    code, report = _report(repo, tmp_path / "pr", "regressed", "--fail-on-regression")
    assert code == 1
    runs = {}
    for rev in ("main", "regressed"):
        (tmp_path / f"{rev}.trec").write_text(sh(["git", "show", f"{rev}:runs/toy/bm25.trec"], repo).stdout)
        runs[rev] = read_run(tmp_path / f"{rev}.trec")
    with chromium() as browser:
        opened = open_page(browser, tmp_path / "pr" / "report.html")
        page = opened.page
        assert page.text_content("#gate-decision") == report.splitlines()[0].replace("**", "")
        summary = page.eval_on_selector_all("#summary-table tbody tr", """rows => rows.map(r =>
            [...r.children].slice(0, 4).map(td => td.textContent))""")
        assert summary == [["all", m, "bm25 @ main", "bm25 @ regressed"] for m in ("nDCG@10", "R@100", "RR@10")]
        page.select_option("#measure", "nDCG@10")
        losers = page.eval_on_selector_all("#queries-table tbody tr", "rs => rs.map(r => r.dataset.query)")
        assert sorted(losers[:12]) == [f"q{i:02d}" for i in REGRESSED]  # -1 each: first when sorted ascending
        page.click("tr[data-query=q03]")
        for side, rev in (("left", "main"), ("right", "regressed")):
            shown = page.eval_on_selector_all(f"#ranking-{side} li.doc", "els => els.map(e => e.dataset.doc)")
            assert shown == [d for d, _ in ranked(runs[rev]["q03"])][:10]
        assert "vocabulary_gap" in page.text_content("#diagnosis")  # the head's class, in words
        assert opened.requests == [opened.url] and opened.errors == []
        screenshot(page, "report-page.png")


def test_a_trailing_slash_on_the_metrics_root_does_not_open_the_gate(repo, tmp_path):
    # issue 42: `--metrics-root metrics/support/` said "No change" and exited 0 while nDCG@10 fell
    copy = _workspace_copy(repo, tmp_path, "regressed")
    per_query = copy / "reports" / "toy" / "bm25" / "per_query.json"
    per_query.write_text(_read_at_main(copy, "reports/toy/bm25/per_query.json"))
    for spelling in ("metrics/toy/", "./metrics/toy", "metrics//toy"):
        code, lines = _report_workspace(copy, tmp_path / "pr", "--metrics-root", spelling,
                                        "--reports-root", "reports/toy/")
        assert code == 3, spelling
        assert lines[0].startswith("**Cannot judge**: bm25: per-query results identical but metrics/toy/bm25.json")


def test_queries_that_vanish_at_head_cannot_be_judged(repo, tmp_path, capsys):
    # issue 42: the queries on which the head regressed vanish from per_query.json while the means fall
    import json

    copy = _workspace_copy(repo, tmp_path, "regressed")
    per_query = copy / "reports" / "toy" / "bm25" / "per_query.json"
    data = json.loads(per_query.read_text())
    data["queries"] = {q: e for q, e in data["queries"].items() if int(q[1:]) not in REGRESSED}
    per_query.unlink()  # a DVC link into the cache: replaced, never written through
    per_query.write_text(json.dumps(data))
    code, lines = _report_workspace(copy, tmp_path / "pr")
    assert code == 3
    assert lines[0] == ("**Cannot judge**: bm25: the judged queries changed: 12 at base only (vanished at head), "
                        "0 at head only, 28 in common; --allow-query-change compares the common ones.")
    # allowed, the common queries are compared, but the gated means fell: still blind
    code, lines = _report_workspace(copy, tmp_path / "pr", "--allow-query-change")
    assert code == 3
    assert lines[0] == ("**Cannot judge**: bm25: the judged queries changed and metrics/toy/bm25.json fell by more "
                        "than the tolerance (nDCG@10 1.0000 → 0.7000, RR@10 1.0000 → 0.7000): the common queries "
                        "cannot say whether that is a loss.")
    assert "Judged queries changed for bm25 (allowed by --allow-query-change): 12 vanished at head, 0 new; " \
           "compared on the 28 in common." in lines


def test_a_metrics_root_spelt_otherwise_never_opens_the_gate(repo, tmp_path):
    # issue 52: with a stale per_query.json at head the gate rightly exits 3, but --metrics-root metric/toy (no
    # such folder), a link to metrics/toy, or METRICS/toy matched no key of `dvc metrics diff` and exited 0
    copy = _workspace_copy(repo, tmp_path, "regressed")
    per_query = copy / "reports" / "toy" / "bm25" / "per_query.json"
    per_query.unlink()  # a DVC link into the cache: replaced, never written through
    per_query.write_text(_read_at_main(copy, "reports/toy/bm25/per_query.json"))
    (copy / "mlink").symlink_to("metrics/toy", target_is_directory=True)
    stale = "**Cannot judge**: bm25: per-query results identical but metrics/toy/bm25.json changed"
    for spelling, first in (("metrics/toy", stale), ("mlink", stale), ("./mlink/", stale),
                            (str(copy / "metrics" / "toy"), stale),  # absolute, inside the repository
                            ("metric/toy", ("**Cannot judge**: (all): --metrics-root metric/toy matches no metrics "
                                           "file (<retriever>.json) at main")),
                            ("METRICS/toy", ("**Cannot judge**: (all): --metrics-root METRICS/toy matches no metrics "
                                            "file (<retriever>.json) at main"))):
        code, lines = _report_workspace(copy, tmp_path / "pr", "--metrics-root", spelling)
        assert code == 3, spelling
        assert lines[0].startswith(first), (spelling, lines[0])
    # absolute and outside the repository: bad input, one line
    assert main(["report", "--base", "main", "--repo", str(copy), "--output", str(tmp_path / "pr2"), "--params",
                 str(copy / "params.yaml"), "--metrics-root", str(tmp_path)]) == 2


def test_a_reports_root_that_matches_nothing_is_a_blind_gate(repo, tmp_path):
    copy = _workspace_copy(repo, tmp_path, "regressed")
    code, lines = _report_workspace(copy, tmp_path / "pr", "--reports-root", "report/toy")
    assert code == 3 and lines[0].startswith("**Cannot judge**: (all): --reports-root report/toy matches no per-query "
                                             "results (<retriever>/per_query.json) at main; (all): --reports-root "
                                             "report/toy matches no per-query results (<retriever>/per_query.json) "
                                             "at workspace")


def test_losers_that_vanish_with_their_metrics_rewritten_cannot_pass_an_allowed_query_change(repo, tmp_path):
    # issue 52: --allow-query-change with exactly the 12 losing queries removed from head's per-query file (and
    # its metrics file made from what is left, so every mean check agrees) exited 0, printing "12 vanished"
    import json

    copy = _workspace_copy(repo, tmp_path, "regressed")
    per_query = copy / "reports" / "toy" / "bm25" / "per_query.json"
    data = json.loads(per_query.read_text())
    data["queries"] = {q: e for q, e in data["queries"].items() if int(q[1:]) not in REGRESSED}
    per_query.unlink()
    per_query.write_text(json.dumps(data))
    metrics = copy / "metrics" / "toy" / "bm25.json"
    means = json.loads(metrics.read_text())
    for m in PARAMS["evaluate"]["measures"]:
        means[m] = sum(e["measures"][m] for e in data["queries"].values()) / len(data["queries"])
    metrics.write_text(json.dumps(means))
    code, lines = _report_workspace(copy, tmp_path / "pr", "--allow-query-change")
    assert code == 3
    assert lines[0].startswith("**Cannot judge**: bm25: 12 judged queries vanished at head (e.g. q00); scored 0 "
                               "there, the change would regress (nDCG@10 -0.3000 [")


def test_the_report_refuses_a_half_replaced_set_in_the_workspace_or_a_commit(tmp_path):
    # issue 52: evaluate's outputs are one set; a killed evaluate leaves a record beside them that every
    # reader honours, the report too (it read per_query.json from a set half of another run)
    from retrieval_lab.core.atomic import REPLACING, REPLACING_TEXT
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.reporting.gather import Revision

    (tmp_path / "reports" / "bm25").mkdir(parents=True)
    (tmp_path / "reports" / "bm25" / "per_query.json").write_text('{"queries": {}}')
    sh(["git", "init", "-q", "-b", "main"], tmp_path)
    sh(["git", "add", "-A"], tmp_path)
    sh(["git", "commit", "-qm", "whole"], tmp_path)
    path = "reports/bm25/per_query.json"
    assert Revision(str(tmp_path), None).read_whole(path) == Revision(str(tmp_path), "main").read_whole(path)
    (tmp_path / "reports" / "bm25" / REPLACING).write_text(REPLACING_TEXT + "per_query.json\n")
    with pytest.raises(InputError, match="a killed run left half-replaced"):
        Revision(str(tmp_path), None).read_whole(path)
    sh(["git", "add", "-A"], tmp_path)
    sh(["git", "commit", "-qm", "half"], tmp_path)
    with pytest.raises(InputError, match=r"main:reports/bm25/per_query.json: is one of a set .* killed run"):
        Revision(str(tmp_path), "main").read_whole(path)


def test_latency_is_reported_only_from_a_timing_root_and_says_where_it_was_found(repo, tmp_path):
    import json

    from retrieval_lab.latency import Timing

    def commit_timings(copy: Path, branch: str, timings: dict[str, list[float]]) -> None:
        sh(["git", "checkout", "-q", branch], copy)
        (copy / "timings").mkdir(exist_ok=True)
        for name, ms in timings.items():
            t = Timing(name, "search of one query", 1, {f"q{i}": v / 1000 for i, v in enumerate(ms)}, 0.04,
                       {"cpu": "cpu-A", "cpu_id": "GenuineIntel family 6 model 143 stepping 8", "cpu_isa": ["avx2"],
                        "cpu_count": 2}, "2026-01-01T00:00:00Z")
            (copy / "timings" / f"{name}.json").write_text(json.dumps(t.to_json()))
        sh(["git", "add", "timings"], copy)
        sh(["git", "commit", "-qm", "timings"], copy)

    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    commit_timings(copy, "main", {"bm25": [2, 4, 6, 8], "dense": [1, 2, 3, 4]})
    commit_timings(copy, "regressed", {"bm25": [1, 2, 3, 4]})  # dense untimed at head
    code, report = _report(copy, tmp_path / "pr", "regressed", "--timing-root", "timings", "--fail-on-regression")
    assert code == 1  # latency never moves the gate
    assert ("| bm25 @ main | bm25 @ regressed | 5.00 → 2.50 (-2.50) | 7.70 → 3.85 (-3.85) | 7.94 → 3.97 (-3.97) | "
            "100.0 → 100.0 (+0.0) | 1 → 1 | yes |") in report
    assert "| dense @ main |" not in report and "found at main for 2 of 2 retrievers, at regressed for 1." in report


def test_a_metrics_file_with_an_integer_too_long_to_read_is_one_line(tmp_path):
    # a hostile try: a 5,000-digit number in a committed metrics file was a traceback (exit 1: the REGRESSION code)
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.reporting.gather import read_metrics

    with pytest.raises(InputError, match=r"main:metrics/bm25.json:1 field 'depth'"):
        read_metrics('{"nDCG@10": 0.5, "depth": ' + "9" * 5000 + "}", "main:metrics/bm25.json")
