"""bm25.shards in the pipeline: `dvc repro` with 3 shards on a Dask cluster reruns index@bm25 and retrieve@bm25 only,
and writes the single index's runs/<dataset>/bm25.trec byte for byte; the value put back is restored from DVC's
run cache."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from pipeline_fixtures import DATASET, lock_hashes, sh

pytest.importorskip("distributed")
pytest_plugins = ["dask_fixtures"]  # dask_cluster: a LocalCluster of 2 workers


def _ran(out: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", out))


@pytest.mark.slow
def test_the_sharded_stage_writes_the_single_index_run_byte_for_byte(built_pipeline, dask_cluster):
    built, (address, _) = built_pipeline.repo, dask_cluster
    run, index = built / "runs" / DATASET / "bm25.trec", built / "data" / "index" / "bm25" / DATASET
    single, before = run.read_bytes(), lock_hashes(built)
    params = yaml.safe_load((built / "params.yaml").read_text())
    params["bm25"].update(shards=3, scheduler=address)
    (built / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        out = sh(["dvc", "repro", "retrieve@bm25"], built).stdout
        assert _ran(out) == {"index@bm25", "retrieve@bm25"}, out
        assert len(re.findall(r"shard-0000\d indexed \(\d of 3", out)) == 3, out
        assert run.read_bytes() == single
        assert [s["documents"] for s in json.loads((index / "shards.json").read_text())["shards"]] == [80, 80, 80]
    finally:
        sh(["git", "checkout", "params.yaml"], built)
        out = sh(["dvc", "repro", "retrieve@bm25"], built).stdout  # back to the committed state, from the run cache
    assert _ran(out) == set() and "Stage 'index@bm25' is cached - skipping run" in out, out
    assert lock_hashes(built) == before and run.read_bytes() == single
