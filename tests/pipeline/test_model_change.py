"""Changing the base model (``dense.models.dense``, or the file it names) reruns only the dense stages and what
follows them. Read from the stage graph DVC itself builds from dvc.yaml and params.yaml (no stage runs):
a stage is hit when it reads the ``dense.models.dense`` param (or all of ``dense``) or depends on the lock's path,
and then every stage with a dependency on one of its outputs, transitively.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
import yaml
from beir_fixtures import REPO

# what must NOT rerun: everything lexical, and what only it feeds
UNTOUCHED = {"generate", "prepare", "index@bm25", "retrieve@bm25", "retrieve@lsa", "evaluate@bm25", "evaluate@lsa"}


def _overlaps(a: str, b: str) -> bool:
    pa, pb = PurePosixPath(a), PurePosixPath(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


def test_a_model_change_reruns_only_the_dense_stages_and_what_follows():
    repo_mod = pytest.importorskip("dvc.repo")
    lock = yaml.safe_load((REPO / "params.yaml").read_text())["dense"]["models"]["dense"]
    with repo_mod.Repo(str(REPO)) as repo:
        stages = {s.addressing: s for s in repo.index.stages}
        hit = set()
        for name, stage in stages.items():
            for dep in stage.deps:
                params = getattr(dep, "params", None)
                reads_lock = ({"dense", "dense.models", "dense.models.dense"} & set(params) if params is not None
                              else _overlaps(str(dep.def_path), lock))
                if reads_lock:
                    hit.add(name)
        direct = set(hit)
        outs = {name: [str(o.def_path) for o in stage.outs] for name, stage in stages.items()}
        changed = True
        while changed:
            changed = False
            for name, stage in stages.items():
                if name not in hit and any(_overlaps(str(dep.def_path), out) for dep in stage.deps
                                           if getattr(dep, "params", None) is None
                                           for source in hit for out in outs[source]):
                    hit.add(name)
                    changed = True
    # names reads dense.models whole: it checks the names and nothing depends on it
    assert direct == {"names", "encode@dense"} | {n for n in stages if n.startswith("train@")}
    assert hit == set(stages) - UNTOUCHED
    assert {"retrieve-dense@dense", "mine@hard", "fuse@rrf", "evaluate-ft@hard", "compare"} <= hit
