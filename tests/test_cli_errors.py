"""Outputs never destroy what a stage did not write, and OS errors end in one line (issue 22).

Every case runs the real CLI entry point and checks the exit code (2), that stderr is one
line ``error: PATH...`` without a traceback, and that whatever stood at the paths involved
is still there byte for byte.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from beir_fixtures import REPO, default_params, write_beir

from retrieval_lab import cli, runs
from retrieval_lab.core import atomic
from retrieval_lab.core.atomic import MARKER

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"document about topic {i}"} for i in range(1, 4)]
QUERIES = [{"_id": f"q{i}", "text": f"topic {i}"} for i in range(1, 4)]
QRELS = {"train": [("q1", "d1", 1)], "test": [("q2", "d2", 1), ("q3", "d3", 1)]}
RUN = "q2 Q0 d2 1 2.0 t\nq2 Q0 d1 2 1.0 t\nq3 Q0 d3 1 3.0 t\n"
EARLIER = "q2 Q0 d1 1 1.0 earlier\n"  # an earlier run, kept whole by a write that fails


@pytest.fixture
def beir(tmp_path) -> Path:
    return write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)


@pytest.fixture
def params(tmp_path) -> Path:
    return default_params(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file below ``path`` (or ``path`` itself) by relative name, with its bytes."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def error_line(argv: list[str], capsys) -> str:
    """Run the CLI; expect exit 2 and exactly one line on stderr, ``error: ...``."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}, stderr: {err}"
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def retrieve(beir: Path, out, params: Path) -> list[str]:
    return ["retrieve", "--retriever", "bm25", "--dataset", str(beir), "--split", "test", "--output", str(out),
            "--params", str(params)]


def no_temporaries(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name] == []


# ----------------------------------------------------------------------------- what an output may replace


def test_retrieve_refuses_a_folder_of_other_files(beir, params, tmp_path, capsys):
    # the issue: `retrieve ... --output precious/` exited 0 and precious/ was gone, a run file in its place
    precious = tmp_path / "precious"
    (precious / "sub").mkdir(parents=True)
    (precious / "thesis.tex").write_text("years of work")
    (precious / "sub" / "data.csv").write_text("1,2\n")
    before = snapshot(precious)
    err = error_line(retrieve(beir, f"{precious}/", params), capsys)
    assert f"{precious}" in err and "field '--output'" in err and "is a folder" in err
    assert snapshot(precious) == before
    no_temporaries(tmp_path)


def test_fuse_report_refuses_a_folder(params, tmp_path, capsys):
    for name in ("a.trec", "b.trec"):
        (tmp_path / name).write_text(RUN)
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "keep.json").write_text("{}")
    err = error_line(["fuse", "--method", "rrf", "--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"),
                      "--output", str(tmp_path / "f.trec"), "--report", f"{folder}/", "--params", str(params)],
                     capsys)
    assert "field '--report'" in err and "refusing to replace it" in err
    assert snapshot(folder) == {"keep.json": b"{}"}
    assert not (tmp_path / "f.trec").exists()  # refused before any work: not even the run was written


def test_folder_output_refuses_unmarked_folder_but_replaces_its_own(beir, params, tmp_path, capsys):
    out = tmp_path / "prepared"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    err = error_line(["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(tmp_path / "heldout"), "--params", str(params)], capsys)
    assert "holding files retrieval-lab did not write" in err and str(out) in err
    assert snapshot(out) == {"notes.txt": b"mine"}
    (out / "notes.txt").unlink()  # an empty folder may be replaced, and then the marked output it became
    for _ in range(2):
        assert cli.main(["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(tmp_path / "heldout"), "--params", str(params)]) == 0
        assert sorted(p.name for p in out.iterdir()) == [MARKER, "corpus.jsonl", "qrels", "queries.jsonl",
                                                         "split.json"]


@pytest.mark.parametrize("where", ["raw", "above"])
def test_prepare_output_is_never_the_raw_folder(where, beir, params, tmp_path, capsys):
    # the issue: prepare --output == --raw deleted the collection's other files (README.txt, qrels/dev.tsv)
    (beir / "README.txt").write_text("how this collection was made")
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    before = snapshot(beir)
    out = beir if where == "raw" else tmp_path
    err = error_line(["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(tmp_path / "heldout"), "--params", str(params)], capsys)
    assert f"{'is' if where == 'raw' else 'contains'} the input --raw ({beir})" in err
    assert snapshot(beir) == before
    no_temporaries(beir.parent)


def test_prepare_refuses_the_raw_folder_even_when_marked(tmp_path, beir, params, capsys):
    # a prepared folder is a marked output; used as --raw it is still an input
    prepared = tmp_path / "prepared"
    assert cli.main(["prepare", "--raw", str(beir), "--output", str(prepared), "--heldout", str(tmp_path / "heldout"), "--params", str(params)]) == 0
    capsys.readouterr()
    before = snapshot(prepared)
    error_line(["prepare", "--raw", str(prepared), "--output", str(prepared), "--heldout", str(tmp_path / "heldout"), "--params", str(params)], capsys)
    assert snapshot(prepared) == before


@pytest.mark.parametrize("command", ["retrieve", "prepare", "generate"])
def test_output_dot_is_refused(command, beir, params, tmp_path, monkeypatch, capsys):
    # the issue: `--output .` ended in a ValueError traceback
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    argv = {"retrieve": retrieve(beir, ".", params),
            "prepare": ["prepare", "--raw", str(beir), "--output", ".", "--heldout", str(tmp_path / "heldout"), "--params", str(params)],
            "generate": ["generate", "--output", ".", "--params", str(params)]}[command]
    err = error_line(argv, capsys)
    assert err.startswith("error: . field '--output': is the working folder or one above it")
    assert snapshot(tmp_path) == before


def test_fuse_output_is_never_one_of_its_runs(params, tmp_path, capsys):
    for name in ("a.trec", "b.trec"):
        (tmp_path / name).write_text(RUN)
    err = error_line(["fuse", "--method", "rrf", "--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"),
                      "--output", str(tmp_path / "b.trec"), "--params", str(params)], capsys)
    assert f"is the input --runs ({tmp_path / 'b.trec'})" in err
    assert (tmp_path / "b.trec").read_text() == RUN


def test_params_file_is_never_an_output(beir, params, capsys):
    before = params.read_text()
    error_line(retrieve(beir, params, params), capsys)
    assert params.read_text() == before == "# every section at its default\n"


def test_pool_merge_output_is_never_the_qrels_it_extends(beir, tmp_path, capsys):
    qrels = beir / "qrels" / "test.tsv"
    before = qrels.read_bytes()
    labels = tmp_path / "pool.tsv"
    labels.write_text("query-id\tcorpus-id\tscore\n")
    err = error_line(["pool", "--merge", str(labels), "--qrels", str(qrels), "--output", str(qrels)], capsys)
    assert "is the input --qrels" in err
    assert qrels.read_bytes() == before


def test_evaluate_reports_folder_is_never_the_dataset(beir, params, tmp_path, capsys):
    (tmp_path / "run.trec").write_text(RUN)
    before = snapshot(beir)
    err = error_line(["evaluate", "--dataset", str(beir), "--run", str(tmp_path / "run.trec"), "--metrics",
                      str(tmp_path / "m.json"), "--reports", str(beir), "--params", str(params)], capsys)
    assert "is the input --dataset" in err
    assert snapshot(beir) == before and not (tmp_path / "m.json").exists()


# ----------------------------------------------------------------------------- OS errors: one line, old output kept


@pytest.fixture
def earlier_run(tmp_path) -> Path:
    out = tmp_path / "runs" / "bm25.trec"
    out.parent.mkdir()
    out.write_text(EARLIER)  # a run: what retrieve --output replaces (a file of another kind it refuses)
    return out


def test_read_only_folder(beir, params, earlier_run, monkeypatch, capsys):
    # root ignores file modes, so the file system's answer is simulated where it comes: at the rename
    def read_only(src, dst):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(src), None, os.fspath(dst))

    monkeypatch.setattr(atomic.os, "replace", read_only)
    err = error_line(retrieve(beir, earlier_run, params), capsys)
    assert err == f"error: {earlier_run}: Read-only file system\n"
    assert earlier_run.read_text() == EARLIER
    no_temporaries(earlier_run.parent)


def test_disk_full_while_writing(beir, params, earlier_run, monkeypatch, capsys):
    real_open = open

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):  # write(2) on a full disk: ENOSPC, and no file name
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(runs, "open", lambda path, mode="r", *a, **k: FullDisk(real_open(path, mode, *a, **k)),
                        raising=False)
    err = error_line(retrieve(beir, earlier_run, params), capsys)
    assert err == f"error: {earlier_run}: No space left on device\n"
    assert earlier_run.read_text() == EARLIER
    no_temporaries(earlier_run.parent)


def test_parent_path_is_a_file(beir, params, tmp_path, capsys):
    (tmp_path / "afile").write_text("not a folder")
    out = tmp_path / "afile" / "runs" / "bm25.trec"
    err = error_line(retrieve(beir, out, params), capsys)
    assert err == f"error: {out} field '--output': its parent {tmp_path / 'afile'} is a file, not a folder\n"
    assert (tmp_path / "afile").read_text() == "not a folder"


def test_any_os_error_in_a_command_is_one_line(tmp_path, monkeypatch, capsys):
    # wherever it comes from, an OSError with a file name ends in `error: PATH: reason`
    def stage(args):
        (tmp_path / "afile").write_text("x")
        os.listdir(tmp_path / "afile")

    monkeypatch.setattr("retrieval_lab.commands.generate.run", stage)
    err = error_line(["generate", "--output", str(tmp_path / "out")], capsys)
    assert err == f"error: {tmp_path / 'afile'}: Not a directory\n"


def _run_with_closed_stdout(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a child whose stdout is a pipe nobody reads any more (as `... | head -c0`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the child starts: its first write to stdout meets EPIPE
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    try:
        return subprocess.run([sys.executable, "-m", "retrieval_lab.cli", *argv], check=False,
                              stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, timeout=120)
    finally:
        os.close(write_end)


def test_stdout_closed(beir, params, tmp_path):
    out = tmp_path / "run.trec"
    done = _run_with_closed_stdout(retrieve(beir, out, params), tmp_path)
    assert done.returncode == 2, done.stderr
    # issue 42: an exit 2 read as "nothing changed" while the run had been replaced: the message says so
    assert done.stderr == f"error: standard output: Broken pipe (its reader closed it); the outputs were written " \
                          f"first: {out}\n"
    # the run was written before the summary line could not be: it is whole
    assert [line.split()[:3] for line in out.read_text().splitlines()][:1] == [["q2", "Q0", "d2"]]


@pytest.mark.parametrize("argv", [
    ["score-runs", "{dir}", "{run}", "-m", "nDCG@10"],  # a folder given as the qrels
    ["score-runs", "{qrels}", "{dir}", "-m", "nDCG@10"],  # as a run
    ["compare-runs", "{qrels}", "{run}", "{dir}", "-m", "nDCG@10"],
    ["table", "--from-inputs", "{dir}", "--markdown", "{out}.md", "--csv", "{out}.csv"],
])
def test_a_folder_where_a_file_is_read_is_called_a_folder_not_missing(beir, tmp_path, capsys, argv):
    (tmp_path / "adir").mkdir()
    (tmp_path / "run.trec").write_text(RUN)
    names = {"dir": tmp_path / "adir", "run": tmp_path / "run.trec", "qrels": beir / "qrels" / "test.tsv",
             "out": tmp_path / "out"}
    err = error_line([a.format(**names) for a in argv], capsys)
    assert err == f"error: {tmp_path / 'adir'}: is a folder; expected a file\n"
