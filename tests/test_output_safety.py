"""Issue 42's severe output cases, one test each, through the console script's path (``cli.main``).

Each wrote over an input or a user's file with exit 0 before the one guard (:mod:`core.guard`); each
must now be refused in one line, with every byte of the inputs unchanged. The generated cases of
``tests/core/test_guard.py`` cover every command; these are the issue's own reproductions, on real data.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from beir_fixtures import REPO, default_params, write_beir
from test_cli_errors import CORPUS, QRELS, QUERIES, RUN, error_line, snapshot

from retrieval_lab import cli


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "col", CORPUS, QUERIES, QRELS)
    default_params(tmp_path)
    (tmp_path / "run.trec").write_text(RUN)
    return tmp_path


def _params(work: Path) -> list[str]:
    return ["--params", str(work / "defaults.yaml")]


def _refused(work: Path, argv: list[str], capsys, said: str) -> None:
    before = snapshot(work)
    err = error_line(argv, capsys)
    assert said in err, err
    after = snapshot(work)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing an input holds changed
    assert set(after) == set(before), set(after) ^ set(before)  # and nothing new written


def test_retrieve_output_that_is_a_dataset_file_is_refused(work, capsys):
    _refused(work, ["retrieve", "--retriever", "bm25", "--dataset", "col", "--split", "test",
                    "--output", "col/corpus.jsonl", *_params(work)], capsys, "lies inside the input --dataset (col)")


def test_retrieve_output_through_a_linked_dataset_folder_is_refused(work, capsys):
    (work / "colalias").symlink_to(work / "col")
    _refused(work, ["retrieve", "--retriever", "bm25", "--dataset", "col", "--split", "test",
                    "--output", "colalias/queries.jsonl", *_params(work)], capsys, "lies inside the input --dataset")


def test_evaluate_metrics_inside_the_dataset_is_refused(work, capsys):
    _refused(work, ["evaluate", "--dataset", "col", "--run", "run.trec", "--metrics", "col/corpus.jsonl",
                    "--reports", "rep", *_params(work)], capsys, "field '--metrics': lies inside the input --dataset")


def test_pool_output_over_the_datasets_test_qrels_is_refused(work, capsys):
    _refused(work, ["pool", "--runs", "run.trec", "--dataset", "col", "--depth", "5",
                    "--output", "col/qrels/test.tsv"], capsys, "lies inside the input --dataset")


def test_compare_output_over_a_per_query_file_it_reads_is_refused(work, capsys):
    (work / "r" / "bm25").mkdir(parents=True)
    (work / "r" / "bm25" / "per_query.json").write_text(json.dumps({"queries": {}}))
    _refused(work, ["compare", "--reports-root", "r", "--output", "r/bm25/per_query.json", "--markdown", "c.md",
                    *_params(work)], capsys, "is the input --reports-root")


def test_check_resume_output_inside_the_dataset_is_refused(work, capsys):
    (work / "neg.jsonl").write_text("")
    _refused(work, ["check-resume", "--dataset", "col", "--negatives", "neg.jsonl", "--output", "col/corpus.jsonl",
                    *_params(work)], capsys, "lies inside the input --dataset")


def test_evaluate_reports_never_replace_the_users_notes(work, capsys):
    (work / "ud3").mkdir()
    (work / "ud3" / "diagnosis.md").write_text("my notes")
    _refused(work, ["evaluate", "--dataset", "col", "--run", "run.trec", "--metrics", "m.json", "--reports", "ud3",
                    *_params(work)], capsys, "holds diagnosis.md, which retrieval-lab did not write")


def test_evaluate_replaces_the_reports_it_wrote(work, capsys):
    argv = ["evaluate", "--dataset", "col", "--run", "run.trec", "--metrics", "m.json", "--reports", "rep",
            *_params(work)]
    assert cli.main(argv) == 0
    first = snapshot(work / "rep")
    assert cli.main(argv) == 0  # its own files, listed in .retrieval-lab-written: replaced
    assert snapshot(work / "rep") == first
    (work / "rep" / "fusion.json").write_text("another stage's")  # a file it does not write: left alone
    assert cli.main(argv) == 0 and (work / "rep" / "fusion.json").read_text() == "another stage's"


def test_report_output_never_replaces_the_users_report(work, capsys):
    (work / "mydocs").mkdir()
    (work / "mydocs" / "report.md").write_text("my report")
    _refused(work, ["report", "--base", "HEAD", "--output", "mydocs", *_params(work)], capsys,
             "is a folder holding files retrieval-lab did not write")


def test_the_sweep_keeps_the_users_dotfiles_beside_an_output(work, capsys):
    users = {".out.trec.tmp-backup": "backup", ".out.trec.old-2024": "last year's run"}
    for name, text in users.items():
        (work / name).write_text(text)
    argv = ["retrieve", "--retriever", "bm25", "--dataset", "col", "--split", "test", "--output", "out.trec",
            *_params(work)]
    assert cli.main(argv) == 0 and cli.main(argv) == 0
    assert {name: (work / name).read_text() for name in users} == users


@pytest.mark.parametrize("output", ["/dev/stdout", "/dev/null", "/proc/self/fd/1", "devlink"])
def test_an_output_in_the_systems_device_folders_is_refused(work, output):
    # found while probing issue 42: `retrieve --output /dev/stdout` replaced the link /dev/stdout with a file.
    # Checked by the guard alone: nothing is written even if it failed to refuse.
    from retrieval_lab.core import guard
    from retrieval_lab.core.errors import InputError

    (work / "devlink").symlink_to("/dev/null")
    with pytest.raises(InputError, match="the system's device and process files|is a link to"):
        guard.check_paths({"--dataset": work / "col"}, files={"--output": output})
    assert Path("/dev/stdout").is_symlink() and Path("/dev/null").is_char_device()


# ----------------------------------------------------------------------------- a command replaces only what it wrote
# A newcomer's try (exit 0 each time before core.kinds): a file output replaced any regular file. Now it replaces
# only a file of its own kind, what a previous run of it wrote; tests/core/test_guard.py generates the cases of
# every file output, these are the try's own, on real files.


INPUTS = REPO / "docs" / "comparing-experiments" / "inputs.json"  # the worked example's experiments


def _pool(work: Path, output: str = "pool.tsv") -> list[str]:
    return ["pool", "--runs", "run.trec", "other.trec", "--dataset", "col", "--depth", "3", "--output", output]


@pytest.fixture
def runs(work) -> Path:
    (work / "other.trec").write_text("q1 Q0 d1 1 1.0 o\nq2 Q0 d3 1 2.0 o\nq2 Q0 d1 2 1.0 o\nq3 Q0 d2 1 1.0 o\n")
    return work


def test_pool_never_replaces_a_labelled_pool(runs, capsys):
    from kind_samples import labelled

    assert cli.main(_pool(runs)) == 0
    n = labelled(runs / "pool.tsv", runs / "filled.tsv", labels=4)  # an annotator's morning: 4 rows labelled
    (runs / "filled.tsv").replace(runs / "pool.tsv")
    _refused(runs, _pool(runs), capsys, f"field '--output': is a labelled pool ({n} labels): an annotator's work, "
                                        "never replaced; choose another --output")


def test_pool_never_replaces_qrels(runs, capsys):
    (runs / "myqrels.trec").write_text("q1 0 d1 1\nq2 0 d2 0\n")
    _refused(runs, _pool(runs, "myqrels.trec"), capsys, "field '--output': is a qrels file; --output writes a judging "
                                                        "pool")


@pytest.mark.parametrize("name, argv", [
    ("notes.txt", ["retrieve", "--retriever", "bm25", "--dataset", "col", "--split", "test", "--output"]),
    ("make_fr.py", ["fuse", "--method", "rrf", "--runs", "run.trec", "other.trec", "--output"]),
    ("notes.txt", ["page", "run.trec", "other.trec", "--output"]),
])
def test_a_users_file_is_never_replaced(runs, capsys, name, argv):
    (runs / name).write_text("#!/usr/bin/env python3\nprint('fuse')\n" if name.endswith(".py") else "my notes\n")
    _refused(runs, [*argv, name, *_params(runs)], capsys,
             f"error: {name} field '--output': is a file retrieval-lab did not write; --output writes")


def test_judge_export_never_replaces_the_pool_its_database_was_made_from(runs, capsys):
    assert cli.main(_pool(runs)) == 0
    judge = ["judge", "--db", "judgments.sqlite", *_params(runs)]
    assert cli.main([*judge, "--pool", "pool.tsv", "--summary"]) == 0  # the session: its database made
    capsys.readouterr()
    gc.collect()  # its connections closed, as at a process's exit: SQLite folds its -wal and -shm back
    _refused(runs, [*judge, "--export", "pool.tsv"], capsys,
             "field '--export': is the input --db's pool (pool.tsv)")
    assert cli.main([*judge, "--pool", "pool.tsv", "--summary"]) == 0  # the next judge still opens the session


def test_every_command_replaces_what_it_wrote(runs, capsys):
    # the other side of the rule: a command run again over its own outputs replaces them (exit 0 both times, a new
    # file in each place, of the same kind)
    from kind_samples import labelled

    from retrieval_lab.core.kinds import recognised

    assert cli.main(_pool(runs)) == 0
    labelled(runs / "pool.tsv", runs / "filled.tsv")
    p = _params(runs)
    judge = ["judge", "--db", "judgments.sqlite", *p]
    commands = {
        ("bm25.trec", "bm25.json"): ["retrieve", "--retriever", "bm25", "--dataset", "col", "--split", "test",
                                     "--output", "bm25.trec", "--timing", "bm25.json", *p],
        ("fused.trec", "fusion.json"): ["fuse", "--method", "rrf", "--runs", "run.trec", "other.trec", "--qrels",
                                        "col/qrels/train.tsv", "--output", "fused.trec", "--report", "fusion.json",
                                        *p],
        ("pool.tsv",): _pool(runs),
        ("merged.tsv",): ["pool", "--merge", "filled.tsv", "--qrels", "col/qrels/test.tsv", "--output",
                          "merged.tsv"],
        ("page.html",): ["page", "run.trec", "other.trec", "--qrels", "col/qrels/test.tsv", "--output", "page.html",
                         *p],
        ("diagnosis.md",): ["diagnose", "--dataset", "col", "--run", "run.trec", "--output", "diagnosis.md", *p],
        ("diagnosis.json",): ["diagnose", "--dataset", "col", "--run", "run.trec", "--json", "--output",
                              "diagnosis.json", *p],
        ("m.json",): ["evaluate", "--dataset", "col", "--run", "run.trec", "--metrics", "m.json", "--reports", "rep",
                      *p],
        ("judged.tsv", "judged.tsv.provenance.tsv"): [*judge, "--export", "judged.tsv"],
        ("t.md", "t.csv", "t.png", "inputs.json"): ["table", "--from-inputs", str(INPUTS), "--markdown", "t.md",
                                                    "--csv", "t.csv", "--plot", "t.png", "--inputs", "inputs.json"],
    }
    assert cli.main([*judge, "--pool", "pool.tsv", "--summary"]) == 0  # the judging session the export reads
    for outputs, argv in commands.items():
        assert cli.main(argv) == 0, capsys.readouterr().err
        first = {name: ((runs / name).stat().st_ino, recognised(runs / name)) for name in outputs}
        assert None not in {kind for _, kind in first.values()}, first
        assert cli.main(argv) == 0, (argv, capsys.readouterr().err)  # over its own outputs
        again = {name: ((runs / name).stat().st_ino, recognised(runs / name)) for name in outputs}
        for name in outputs:
            assert again[name][0] != first[name][0] and again[name][1] == first[name][1], (name, first, again)
