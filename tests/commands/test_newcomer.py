"""What a newcomer with a BEIR folder of their own stumbled on (issue 43), each fixed and pinned here:
a diagnosis on any run, a folder with only qrels/test.tsv, no "every query unseen" without a training
split, Judged@k and an unjudged top document explained where they appear, and an MDE sentence that does not
call a significant difference noise. Every message says only what applies."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab import cli

CORPUS = [
    {"_id": "d1", "title": "Router", "text": "How to reset the router password"},
    {"_id": "d2", "title": "Router", "text": "Router firmware update steps"},
    {"_id": "d3", "title": "Spooler", "text": "The print spooler stopped"},
    {"_id": "d4", "title": "Printer", "text": "Printer shows offline status"},
]
QUERIES = [{"_id": "q1", "text": "reset router password"}, {"_id": "q2", "text": "printer offline"},
           {"_id": "q3", "text": "spooler"}]
# only relevant documents are judged (most BEIR sets): every other document is unjudged
ONLY_RELEVANT = [("q1", "d1", 1), ("q2", "d4", 1), ("q3", "d3", 1)]
RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq2 Q0 d4 1 1.0 t\nq3 Q0 d1 1 1.0 t\n"  # q1 late, q3 misses d3


@pytest.fixture
def folder(tmp_path):
    """A raw BEIR folder with only qrels/test.tsv, and a run."""
    root = write_beir(tmp_path / "mine", CORPUS, QUERIES, {"test": ONLY_RELEVANT})
    (tmp_path / "run.trec").write_text(RUN, encoding="utf-8")
    return root, tmp_path / "run.trec"


def test_diagnose_works_on_a_raw_folder_and_prints_what_evaluate_writes(folder, tmp_path, capsys):
    root, run = folder
    assert run_command("diagnose", ["--dataset", str(root), "--run", str(run), "-k", "1"]) == 0
    printed = capsys.readouterr().out
    # k = 1: q1's positive is at rank 2 (late_rank), q3's is not retrieved and the top d1 shares no token
    # with "spooler" while d3 does: not a vocabulary gap, not homonymy -> not_retrieved; q2 is fine
    assert "2 of 3 queries have no positive in the top 1." in printed
    assert "| late_rank | 1 |" in printed and "| not_retrieved | 1 |" in printed
    # q1's top d2 shares "router" of reset/router/password, its positive d1 all three; d2 is unjudged
    assert "top: d2 (unjudged, shares 1 query tokens vs 3 for the best positive)" in printed
    argv = ["--dataset", str(root), "--run", str(run), "--metrics", str(tmp_path / "m.json"),
            "--reports", str(tmp_path / "rep"), "--set", "evaluate.diagnose_k=1"]
    assert run_command("evaluate", argv) == 0
    said = capsys.readouterr().out
    assert (tmp_path / "rep" / "diagnosis.md").read_text(encoding="utf-8") == printed  # one diagnosis
    assert f"diagnosis: 2 queries without a positive in the top 1 -> {tmp_path / 'rep' / 'diagnosis.md'}" in said
    assert run_command("diagnose", ["--dataset", str(root), "--run", str(run), "-k", "1", "--json",
                                    "--output", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "d.json").read_text()) == json.loads((tmp_path / "rep" / "diagnosis.json").read_text())


def test_help_says_any_beir_folder_works_and_explains_what_it_shows(capsys):
    for name in ("evaluate", "diagnose"):
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "prepared BEIR folder" not in text and "BEIR folder" in text
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a folder with only qrels/test.tsv is measured as it is" in text
    assert "qrels that list only relevant documents" in text  # Judged@k
    with pytest.raises(SystemExit):
        cli.main(["diagnose", "--help"])
    assert '"unjudged" beside a top document means the qrels do not judge it' in " ".join(
        capsys.readouterr().out.split())


def test_without_a_training_split_evaluate_says_strata_are_not_available(folder, tmp_path, capsys):
    root, run = folder
    argv = ["--dataset", str(root), "--run", str(run), "--metrics", str(tmp_path / "m.json"),
            "--reports", str(tmp_path / "rep")]
    assert run_command("evaluate", argv) == 0
    said = capsys.readouterr().out
    assert "unseen" not in said.replace("seen and unseen need judged training queries", "")
    assert "strata: no training split: strata not computed (seen and unseen need judged training queries" in said
    # Judged@10: q1's top 10 holds one judged document (d1), q2's one (d4), q3's none (d1 is q1's): 1/15 < 0.1
    assert "WARNING: Judged below 0.1" in said and "list only relevant documents" in said
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["Judged@10"] == pytest.approx((1 + 1 + 0) / 10 / 3)
    assert "seen" not in metrics and "unseen" not in metrics
    per_query = json.loads((tmp_path / "rep" / "per_query.json").read_text())["queries"]
    assert {q: e["seen"] for q, e in per_query.items()} == {"q1": None, "q2": None, "q3": None}


def test_the_judged_hint_appears_only_for_qrels_listing_only_relevant_documents(folder, tmp_path, capsys):
    root, run = folder
    qrels = root / "qrels" / "test.tsv"
    assert run_command("score-runs", [str(qrels), str(run), "-m", "RR"]) == 0
    said = capsys.readouterr().out  # RR has no cutoff: Judged@10 is added
    assert "Judged@10: the share of the top k the qrels judge. These qrels list only relevant" in said
    graded = tmp_path / "graded.tsv"  # one non-relevant judgment: Judged says something of these qrels
    graded.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in ONLY_RELEVANT)
                      + "q1\td2\t0\n", encoding="utf-8")
    assert run_command("score-runs", [str(graded), str(run), "-m", "RR"]) == 0
    assert "list only relevant" not in capsys.readouterr().out


def test_prepare_takes_a_folder_with_only_test_judgments(folder, tmp_path, capsys):
    # issue 51: what pooling gives (qrels/test.tsv alone) stopped prepare, so it could not enter the pipeline
    import json

    root, run = folder
    assert run_command("prepare", ["--raw", str(root), "--output", str(tmp_path / "p"),
                                   "--heldout", str(tmp_path / "h")]) == 0
    split = json.loads((tmp_path / "p" / "split.json").read_text())
    assert split["mode"] == "test_only" and split["queries"] == {"train": 0, "val": 0}
    assert split["validation"] == "none (no training split: qrels/test.tsv alone)"
    assert (tmp_path / "p" / "qrels" / "train.tsv").read_text() == "query-id\tcorpus-id\tscore\n"
    test = (tmp_path / "h" / "qrels" / "test.tsv").read_text().splitlines()
    assert len(test) - 1 == sum(1 for _ in (root / "qrels" / "test.tsv").open()) - 1
    # evaluated against it: no strata, said so, never "every query unseen"
    capsys.readouterr()
    assert run_command("evaluate", ["--dataset", str(tmp_path / "p"), "--split", "test", "--qrels",
                                    str(tmp_path / "h" / "qrels" / "test.tsv"), "--run", str(run), "--metrics",
                                    str(tmp_path / "m.json"), "--reports", str(tmp_path / "r")]) == 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["strata_note"].startswith("no training split: strata not computed")
    assert "seen" not in metrics and "unseen" not in metrics
    per_query = json.loads((tmp_path / "r" / "per_query.json").read_text())["queries"]
    assert {e["seen"] for e in per_query.values()} == {None}
    (root / "qrels" / "test.tsv").rename(root / "qrels" / "other.tsv")  # no test split at all: still refused
    assert run_command("prepare", ["--raw", str(root), "--output", str(tmp_path / "p2"),
                                   "--heldout", str(tmp_path / "h2")]) == 2
    assert "expected qrels/test.tsv (with qrels/train.tsv: given splits), or qrels/all.tsv" in capsys.readouterr().err
    assert not (tmp_path / "p2").exists()


def test_the_mde_sentence_does_not_call_a_significant_difference_noise(folder, tmp_path, capsys):
    root, run = folder
    head = tmp_path / "head.trec"
    head.write_text("q1 Q0 d1 1 3.0 t\nq2 Q0 d4 1 1.0 t\nq3 Q0 d3 1 1.0 t\n", encoding="utf-8")
    assert run_command("compare-runs", [str(root / "qrels" / "test.tsv"), str(run), str(head), "-m", "RR",
                                        "--set", "evaluate.permutations=200"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "is noise" not in text
    assert "a difference inside the MDE can still be significant" in text
