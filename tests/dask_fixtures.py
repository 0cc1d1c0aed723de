"""A LocalCluster of 2 worker processes (one thread each) shared by a module's sharded tests (fixture ``dask_cluster``),
and a worker plugin that SIGKILLs its own worker when a task of a given kind starts: a worker dying mid-run.

The cluster's scheduler allows one failure per task (``distributed.scheduler.allowed-failures: 1``): a task whose
worker dies once is run again, a second death refuses it. Test modules name this module in ``pytest_plugins``.
The workers import this module by name to run the plugin (tests/ is on their path: pytest's ``pythonpath``).
PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

ALLOWED_FAILURES = 1


class KillOnTask(distributed.WorkerPlugin):
    """A Dask worker plugin: the worker kills itself (SIGKILL) when a task whose key starts with ``prefix`` begins
    executing; only the first time when ``once`` names a file (created then), every time otherwise."""

    name = "kill-on-task"

    def __init__(self, prefix: str, once: str | None = None):
        self.prefix, self.once = prefix, once

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith(self.prefix):
            return
        if self.once is not None:
            try:
                Path(self.once).touch(exist_ok=False)
            except FileExistsError:
                return
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def dask_cluster():
    """(scheduler address, client) of a LocalCluster of 2 worker processes kept for one test module.

    Not for the session: idle, a cluster costs about 0.07 of a core in the test process (its scheduler and
    nannies) and 0.05 in each worker, and the session's cluster sat idle 9 of its 9.5 minutes; a new one starts
    in about 1 s."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           worker_dashboard_address=None)
    with cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield cluster.scheduler_address, client


@pytest.fixture
def killing(dask_cluster):
    """``killing(prefix, once_file=None)`` registers :class:`KillOnTask` on the workers; removed, and both workers
    back, after the test."""
    _, client = dask_cluster
    registered = []

    def register(prefix: str, once: Path | None = None) -> None:
        client.register_plugin(KillOnTask(prefix, None if once is None else str(once)))
        registered.append(KillOnTask.name)

    yield register
    for name in registered:
        client.unregister_worker_plugin(name)
    client.wait_for_workers(2, timeout=60)
