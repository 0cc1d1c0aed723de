"""A file output replaces only a file of its own kind (core.kinds), in the library's writers as in the CLI.

Each writer behind the API (runs, qrels, the judging export and its provenance, the pool, the page, evaluate's
metrics) gets the CLI's cases (tests/core/test_guard.py): over a file of its own kind it replaces it; over a
note, a script, a file of another kind or a labelled pool it raises one InputError naming the argument, and
nothing is written. Each kind's signature is checked on what its writer writes (tests/kind_samples.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from beir_fixtures import REPO, write_beir
from kind_samples import SCRIPT, hostile, labelled, make_samples

import retrieval_lab as rl
from retrieval_lab.core import kinds
from retrieval_lab.core.params_file import load_params

RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d2": 1.5}}


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return make_samples(tmp_path_factory.mktemp("samples"))


@pytest.mark.parametrize("kind", [k for k in kinds.FILE_KINDS if k != kinds.CHECKPOINT])
def test_each_kind_is_recognised_in_what_its_writer_wrote(samples, kind):
    # (a checkpoint: tests/training/test_checkpoint.py, on the one train writes)
    assert kinds.recognised(samples[kind]) == kind


def test_the_signatures_are_the_writers_own():
    from retrieval_lab import page, pipeline_names
    from retrieval_lab.judging import export
    from retrieval_lab.judgment_pool import COLUMNS

    style = (Path(page.__file__).parent / page.STYLE).read_text(encoding="utf-8")
    assert style.startswith(kinds.PAGE_STYLE_MARK)
    assert COLUMNS == kinds.POOL_COLUMNS and export.PROVENANCE_COLUMNS == kinds.PROVENANCE_COLUMNS
    assert pipeline_names.BEGIN == kinds.NAMES_BEGIN


def test_a_pools_labels_are_counted_over_the_whole_file(samples, tmp_path):
    rows = len(samples[kinds.POOL].read_text().splitlines()) - 1
    assert kinds.what_is(samples[kinds.POOL]) == (kinds.POOL, 0)
    assert labelled(samples[kinds.POOL], tmp_path / "two.tsv", labels=2) == 2
    assert kinds.what_is(tmp_path / "two.tsv") == (kinds.LABELLED_POOL, 2)
    crlf = tmp_path / "crlf.tsv"  # saved back by a spreadsheet: CRLF; a label beyond the first 64 KiB still counts
    header, *lines = samples[kinds.POOL].read_text().splitlines()
    filler = [line for _ in range(2000) for line in lines]
    crlf.write_bytes(("\r\n".join([header, *filler, lines[0] + "2"]) + "\r\n").encode())
    assert crlf.stat().st_size > 1 << 16 and rows >= 1
    assert kinds.what_is(crlf) == (kinds.LABELLED_POOL, 1)
    assert kinds.describe(crlf) == "a labelled pool (1 label)"


def test_nothing_to_lose_is_replaced_and_a_link_is_judged_by_what_it_reaches(samples, tmp_path):
    (tmp_path / "empty.trec").write_bytes(b"")
    kinds.check_kind(tmp_path / "empty.trec", kinds.RUN)  # an empty file holds nothing
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing-here")
    kinds.check_kind(tmp_path / "dangling", kinds.RUN)
    (tmp_path / "to-run").symlink_to(samples[kinds.RUN])
    kinds.check_kind(tmp_path / "to-run", kinds.RUN)  # DVC's symlinked outputs: a run, replaced
    (tmp_path / "notes.md").write_text("mine\n")
    (tmp_path / "to-notes").symlink_to(tmp_path / "notes.md")
    with pytest.raises(rl.InputError, match="is a file retrieval-lab did not write"):
        kinds.check_kind(tmp_path / "to-notes", kinds.RUN, "--output")
    with pytest.raises(rl.InputError, match="declares no kind it may replace"):  # no kind declared: replaces nothing
        kinds.check_kind(samples[kinds.RUN], None, "--output")


def test_a_json_or_markdown_of_someone_elses_is_no_kind(tmp_path):
    for name, text in {"compact.json": '{"retriever": "bm25", "summary": {}, "wall_s": 1, "seconds": {}}\n',
                       "nested.json": '{\n  "outer": {\n    "measure": 1,\n    "adjustment": 2,\n'
                                      '    "family_size": 3,\n    "pairs": {}\n  }\n}\n',
                       "title.md": "# My failure diagnosis notes\n", "page.html": "<!DOCTYPE html>\n<p>mine</p>\n",
                       "any.png": "\x89PNG\r\n\x1a\n", "make_fr.py": SCRIPT.decode()}.items():
        (tmp_path / name).write_text(text)
        assert kinds.recognised(tmp_path / name) is None, name


# ----------------------------------------------------------------------------- the library writers
@pytest.fixture(scope="module")
def col(tmp_path_factory):
    root = tmp_path_factory.mktemp("col")
    write_beir(root / "col", [{"_id": f"d{i}", "title": "", "text": f"document about topic {i}"} for i in (1, 2, 3)],
               [{"_id": f"q{i}", "text": f"topic {i}"} for i in (1, 2)], {"test": [("q1", "d1", 1), ("q2", "d2", 1)]})
    rl.write_run(root / "a.trec", RUN, tag="a")
    rl.write_run(root / "b.trec", {"q1": {"d2": 1.0}, "q2": {"d3": 1.0}}, tag="b")
    return root


def _pool(path):
    from kind_samples import _pool_rows

    from retrieval_lab.judgment_pool import write_pool

    write_pool(path, _pool_rows())


def _page(col):
    from retrieval_lab.page import runs_page, write_page

    page = runs_page(col / "a.trec", col / "b.trec", load_params(REPO / "params.yaml"), col / "col/qrels/test.tsv")
    return lambda path: write_page(path, page)


def _metrics(col):
    from retrieval_lab.evaluation import run_evaluation

    params = load_params(REPO / "params.yaml")

    def write(path):
        run_evaluation(col / "col", "test", col / "a.trec", path, path.parent / "reports", params, log=lambda _: None)
    return write


def _writers(col) -> dict[str, tuple[str, object]]:
    from retrieval_lab.judging import export

    return {
        "write_run": (kinds.RUN, lambda path: rl.write_run(path, RUN, tag="t")),
        "write_qrels": (kinds.QRELS, lambda path: rl.write_qrels(path, {"q1": {"d1": 1}})),
        "write_qrels_file": (kinds.QRELS, lambda path: export.write_qrels_file(path, {"q1": {"d1": 1}}, "trec")),
        "write_provenance": (kinds.PROVENANCE, lambda path: export.write_provenance(path, [])),
        "write_pool": (kinds.POOL, _pool),
        "write_page": (kinds.PAGE, _page(col)),
        "evaluate": (kinds.METRICS, _metrics(col)),
    }


WRITERS = ("write_run", "write_qrels", "write_qrels_file", "write_provenance", "write_pool", "write_page", "evaluate")


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_library_writer_replaces_only_a_file_of_its_own_kind(writer, col, samples, tmp_path):
    kind, write = _writers(col)[writer]
    own = tmp_path / "own" / "out"
    own.parent.mkdir()
    write(own)  # a first write, then the same over it: replaced (a new file in its place)
    first = os.stat(own).st_ino
    write(own)
    assert os.stat(own).st_ino != first and kinds.recognised(own) == kind
    for i, (label, (content, words)) in enumerate(hostile(samples, kind).items()):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        (folder / "out").write_bytes(content)
        before = _snapshot(folder)
        with pytest.raises(rl.InputError, match="field 'path'") as caught:
            write(folder / "out")
        assert words in str(caught.value) and "choose another path" in str(caught.value), (label, caught.value)
        assert str(caught.value).count("\n") == 0
        assert _snapshot(folder) == before, f"{writer} over {label}: the folder changed"


def test_the_writers_table_is_whole(col):
    assert set(_writers(col)) == set(WRITERS)
