"""retrieval_lab.core.cluster: shard spans, the cluster's client, and the --shards / --scheduler flags."""

from __future__ import annotations

import argparse

import pytest

from retrieval_lab.core import cluster
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params_cli import add_params_args, add_shard_args, shard_overrides


def test_spans_cut_contiguous_parts_the_larger_first():
    assert cluster.spans(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert cluster.spans(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]  # more shards than items: empty ones last
    assert cluster.spans(0, 2) == [(0, 0), (0, 0)]


def test_a_scheduler_without_any_worker_is_refused_in_one_line(monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(cluster, "WORKER_WAIT_SECONDS", 1)
    with (distributed.LocalCluster(n_workers=0, dashboard_address=":0") as empty, pytest.raises(InputError) as err,
          cluster.client_for(empty.scheduler_address, 2, "dense.scheduler")):
        pass
    assert str(err.value) == (f"field 'dense.scheduler': the Dask scheduler at {empty.scheduler_address} has no "
                              "worker after 1 s")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_shard_args(parser)
    add_params_args(parser)
    return parser.parse_args(argv)


def test_the_shard_flags_are_the_params_and_two_values_for_one_are_refused():
    assert shard_overrides(_args("--shards", "4", "--scheduler", "tcp://h:8786"), "bm25") == [
        "bm25.shards=4", "bm25.scheduler=tcp://h:8786"]
    assert shard_overrides(_args("--set", "bm25.k1=1.0"), "dense") == []
    with pytest.raises(InputError, match=r"--shards 4 and --set dense.shards=2 both set dense.shards: give one"):
        shard_overrides(_args("--shards", "4", "--set", "dense.shards=2"), "dense")
    with pytest.raises(InputError, match="lsa runs in one process: --scheduler is for bm25 and dense"):
        shard_overrides(_args("--scheduler", "tcp://h:8786"), "lsa")
