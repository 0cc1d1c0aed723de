"""``retrieval-lab names`` and the ``names`` stage: no name of params.yaml reaches a path DVC deletes unchecked.

DVC removes a stage's outputs before its command runs. With names read straight from params.yaml, a
``train.variants`` key ``..`` made ``dvc repro -s 'train@..'`` remove ``models/finetuned`` and
``dataset: ..`` made ``dvc repro -s prepare`` remove ``data/``. Here the real ``dvc repro`` runs in a
scratch DVC project holding this repository's dvc.yaml, params.yaml and sources, with the user's files
where those paths would have reached and a folder beside the project where ``../../../../victim`` would.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO
from pipeline_fixtures import sh

from retrieval_lab import cli

USER_FILES = ["models/finetuned/notes.md", "models/finetuned/support/mine.txt", "data/notes.md", "notes.md"]


@pytest.fixture
def project(tmp_path) -> Path:
    from dvc.repo import Repo

    root = tmp_path / "clone"
    root.mkdir()
    Repo.init(str(root), no_scm=True).close()
    for name in ("dvc.yaml", "params.yaml", "models/base.lock.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in USER_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"the user's {name}\n", encoding="utf-8")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "file").write_text("outside the clone\n", encoding="utf-8")
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root.parent)): p.read_bytes() for p in sorted(root.parent.rglob("*"))
            if p.is_file() and ".dvc" not in p.parts}


def _edit(root: Path, edit) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    edit(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def _names(root: Path, capsys, *extra: str) -> tuple[int, str]:
    code = cli.main(["names", "--dvc-yaml", str(root / "dvc.yaml"), "--params", str(root / "params.yaml"), *extra])
    return code, capsys.readouterr().err


BAD = [  # (what, the edit of params.yaml, the field the one-line refusal names)
    ("variant ..", lambda p: p["train"]["variants"].update({"..": {"negatives": "hard"}}), "train.variants"),
    ("variant ../../../../victim",
     lambda p: p["train"]["variants"].update({"../../../../victim": {"negatives": "hard"}}), "train.variants"),
    ("dataset ..", lambda p: p.update(dataset=".."), "dataset"),
    ("model a/b", lambda p: p["dense"]["models"].update({"a/b": "models/base.lock.json"}), "dense.models"),
    ("method zzz", lambda p: p["fusion"]["methods"].update(zzz={"value": 1, "grid": [1]}), "fusion.methods"),
]


@pytest.mark.parametrize(("label", "edit", "field"), BAD, ids=[b[0] for b in BAD])
def test_names_refuses_a_bad_name_in_one_line_and_writes_nothing(project, capsys, label, edit, field):
    _edit(project, edit)
    before = (project / "dvc.yaml").read_bytes()
    code, err = _names(project, capsys)
    assert code == 2 and err.count("\n") == 1 and "params.yaml" in err and f"field '{field}" in err, err
    assert (project / "dvc.yaml").read_bytes() == before


def test_bad_names_in_params_delete_nothing_through_dvc(project):
    for _, edit, _ in BAD:
        _edit(project, edit)
    before = _snapshot(project)
    # what a user types after such an edit: the stages by the bad names, the stage `dataset` reaches, and
    # the whole pipeline. DVC never sees the names (dvc.yaml's block still holds the checked ones), and the
    # commands DVC does run refuse the params before writing anything
    for args in (["repro", "-s", "train@.."], ["repro", "-s", "train@../../../../victim"], ["repro", "-s", "prepare"],
                 ["repro"]):
        assert sh(["dvc", *args], project, check=False).returncode != 0, args
    after = _snapshot(project)
    assert sorted(set(before) - set(after)) == []
    assert all(after[p] == before[p] for p in before)
    assert set(USER_FILES) <= {p.split("/", 1)[1] for p in after} and "victim/file" in after


def test_a_new_name_waits_for_names_and_the_stage_says_so(project, capsys):
    _edit(project, lambda p: (p["train"]["variants"].update(warm={"negatives": "random"}),
                              p.update(dataset="scifact")))
    assert sh(["dvc", "repro", "-s", "train@warm"], project, check=False).returncode != 0  # no such stage yet
    check = sh(["dvc", "repro", "-s", "names"], project, check=False)
    assert check.returncode != 0
    assert ("dataset is 'scifact' in params.yaml, 'support' in dvc.yaml; train.variants adds 'warm'): "
            "run `retrieval-lab names`") in check.stderr + check.stdout
    assert _names(project, capsys, "--check")[0] == 2  # the command the stage runs, in one process
    text = (project / "dvc.yaml").read_text(encoding="utf-8")
    code, _ = _names(project, capsys)
    assert code == 0
    written = (project / "dvc.yaml").read_text(encoding="utf-8")
    # only the block changed, and DVC now makes the new variant's stages under the new dataset's paths
    assert written.split("# BEGIN generated names")[0] == text.split("# BEGIN generated names")[0]
    assert written.split("# END generated names")[1] == text.split("# END generated names")[1]
    assert "warm: {negatives: random}" in written
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        stages = {s.name: s for s in repo.index.stages}
    assert {"train@warm", "retrieve-ft@warm", "evaluate-ft@warm"} <= set(stages)
    assert [str(o.def_path) for o in stages["prepare"].outs] == ["data/prepared/scifact", "data/heldout/scifact"]
    assert sh(["dvc", "repro", "-s", "names"], project).returncode == 0
