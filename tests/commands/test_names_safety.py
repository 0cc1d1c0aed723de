"""What ``retrieval-lab names`` writes into dvc.yaml is safe there (issue 52, item 4): no run named after the
pipeline's own files, no model value a shell would read, no DVC interpolation in a path; and the file keeps
what it is, a link or CRLF line endings. In-process on copies of the repository's dvc.yaml and params.yaml
(tests/commands/test_names.py runs the real ``dvc repro`` on the names it refuses)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from beir_fixtures import REPO

from retrieval_lab import cli
from retrieval_lab.pipeline_names import RESERVED, declared


@pytest.fixture
def project(tmp_path):
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "code").mkdir()
    return tmp_path


def _edit(root, edit) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    edit(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def _names(root, capsys, dvc_yaml=None, *extra) -> tuple[int, str]:
    code = cli.main(["names", "--dvc-yaml", str(dvc_yaml or root / "dvc.yaml"), "--params", str(root / "params.yaml"),
                     *extra])
    return code, capsys.readouterr().err


def _external(name: str, path: str = "code"):
    return lambda p: p["external"].update({name: {"path": path, "callable": "m:f"}})


REFUSED = [  # (label, edit, field, words)
    # `dvc repro -s evaluate-external@compare` deleted the tracked metrics/<dataset>/compare.json
    ("external compare", _external("compare"), "external.compare", "taken by a file of the pipeline's own"),
    ("external diagnosis", _external("diagnosis"), "external.diagnosis", "taken by a file of the pipeline's own"),
    ("external Per_Query", _external("Per_Query"), "external.Per_Query", "taken by a file"),  # case-blind
    ("model compare.md", lambda p: p["dense"]["models"].update({"compare.md": "models/base.lock.json"}),
     "dense.models.compare.md", "taken by a file"),
    # encode's cmd is `... --model ${item} ...`: this ran touch
    ("model value with a shell command", lambda p: p["dense"]["models"].update(evil="models/m; touch MARKER; true"),
     "dense.models.evil", "reaches encode's shell command"),
    ("model value $(...)", lambda p: p["dense"]["models"].update(evil="models/$(touch MARKER)"),
     "dense.models.evil", "reaches encode's shell command"),
    ("model value as an option", lambda p: p["dense"]["models"].update(evil="--help"),
     "dense.models.evil", "not begin with -"),
    # accepted before, then every dvc command failed on the interpolation
    ("external path ${...}", _external("mine", "${names.dataset}"), "external.mine.path", "DVC interpolation"),
    # hostile M1: `params: - external.${key}` read as nested keys; the stage failed after deleting its output
    ("external a.b", _external("a.b"), "external.a.b", "holds a '.'"),
    ("model m.v2", lambda p: p["dense"]["models"].update({"m.v2": "models/base.lock.json"}), "dense.models.m.v2",
     "holds a '.'"),
    ("variant h.2", lambda p: p["train"]["variants"].update({"h.2": {"negatives": "hard"}}), "train.variants.h.2",
     "holds a '.'"),
    # hostile M2: one file with another run's on a case-insensitive file system (refused by the schema)
    ("model BM25", lambda p: p["dense"]["models"].update(BM25="models/base.lock.json"), "dense.models.BM25",
     "('bm25': names differing only in case are one file on macOS and Windows)"),
    ("variant Hard", lambda p: p["train"]["variants"].update(Hard={"negatives": "hard"}), "train.variants.Hard",
     "run name 'dense-ft-Hard' is another retriever's ('dense-ft-hard'"),
]


@pytest.mark.parametrize(("label", "edit", "field", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_names_refuses_what_dvc_yaml_cannot_take_in_one_line(project, capsys, label, edit, field, words):
    _edit(project, edit)
    before = (project / "dvc.yaml").read_bytes()
    code, err = _names(project, capsys)
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert f"{project / 'params.yaml'}:" in err and f"field '{field}'" in err, err  # the file, its line, the key
    assert (project / "dvc.yaml").read_bytes() == before
    assert not (project / "MARKER").exists()


def test_the_reserved_names_are_the_pipelines_files():
    assert {"compare", "compare.json", "compare.md", "compare.html", "per_query", "diagnosis", "diagnosis.md",
            "recall_curve"} <= RESERVED
    assert not {"bm25", "dense", "recipes", "comparer"} & RESERVED


def test_good_names_and_model_values_are_written(project, capsys):
    _edit(project, lambda p: (p["dense"]["models"].update(e5="hub:intfloat/e5-small-v2@ffb93f3b"),
                              _external("recipes")(p)))
    code, err = _names(project, capsys)
    assert code == 0, err
    names = declared((project / "dvc.yaml").read_text(), "dvc.yaml")
    assert names.dense["e5"] == "hub:intfloat/e5-small-v2@ffb93f3b" and names.external == {"recipes": {"path": "code"}}


def test_a_linked_dvc_yaml_stays_a_link(project, capsys):
    # before: the link was replaced by a file, the pipeline file it pointed to left behind
    real = project / "pipeline" / "dvc.yaml"
    real.parent.mkdir()
    shutil.move(project / "dvc.yaml", real)
    (project / "dvc.yaml").symlink_to(real)
    _edit(project, _external("recipes"))
    code, err = _names(project, capsys)
    assert code == 0, err
    assert (project / "dvc.yaml").is_symlink() and (project / "dvc.yaml").resolve() == real
    assert "recipes: {path: code}" in real.read_text()
    assert sorted(p.name for p in real.parent.iterdir()) == ["dvc.yaml"]  # no temporary left beside it


def test_a_crlf_dvc_yaml_keeps_its_line_endings(project, capsys):
    # before: the whole file was rewritten with LF
    crlf = (project / "dvc.yaml").read_bytes().replace(b"\n", b"\r\n")
    (project / "dvc.yaml").write_bytes(crlf)
    _edit(project, _external("recipes"))
    code, err = _names(project, capsys)
    assert code == 0, err
    written = (project / "dvc.yaml").read_bytes()
    assert b"recipes: {path: code}\r\n" in written and written.count(b"\n") == written.count(b"\r\n")
    before, after = crlf.split(b"  # BEGIN generated names"), written.split(b"  # BEGIN generated names")
    assert after[0] == before[0] and after[1].split(b"# END generated names")[1] == \
        before[1].split(b"# END generated names")[1]  # only the block changed
    assert _names(project, capsys, None, "--check")[0] == 0


def test_no_command_takes_a_value_from_params_yaml_unchecked():
    # DVC puts ${...} into a stage's shell command before retrieval-lab checks anything: each must come from the
    # names block (checked by `names`), a foreach's key or item, or dvc.yaml's own lexical table
    import re

    pipeline = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    found = []
    for name, stage in pipeline["stages"].items():
        body = stage.get("do", stage)
        for expr in re.findall(r"\$\{([^}]+)\}", body["cmd"] + " ".join(map(str, body.get("deps", [])))):
            found.append(expr)
            assert expr.startswith(("names.", "item.")) or expr in ("key", "item"), \
                f"{name}: ${{{expr}}} reaches its command from params.yaml unchecked"
    assert "names.uses.mine.source" in found and "names.uses.fusion.dense" in found and len(found) > 50


@pytest.mark.parametrize("key, value", [("mine.source", "dense; touch MARKER"), ("fusion.dense", "x$(touch MARKER)"),
                                        ("train.base", "a b")])
def test_a_run_name_a_command_uses_is_checked_before_it_reaches_the_block(project, capsys, key, value):
    section, name = key.split(".")
    _edit(project, lambda p: p[section].update({name: value}))
    before = (project / "dvc.yaml").read_bytes()
    code, err = _names(project, capsys)
    assert code == 2 and err.count("\n") == 1 and f"field '{key}'" in err, err
    assert (project / "dvc.yaml").read_bytes() == before
