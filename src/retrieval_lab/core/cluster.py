"""Sharded runs on Dask (``bm25.shards``, ``dense.shards`` > 1): the cluster's client, each shard's task followed to
its end with one progress line, and a worker lost mid-run turned into a retry or a refusal, never a partial result.

Where the tasks run: the ``scheduler`` a params section names (a Dask scheduler's address, ``tcp://HOST:8786``),
or, when it is null, a LocalCluster of min(shards, cores) worker processes of one thread each on this machine,
started and stopped with the command (:func:`client_for`).

A worker that dies (killed, out of memory, its machine gone) loses the task it was running and the results it
held (a shard's index): the scheduler runs them again on another worker, recomputing what they read, so the run
is the same. A task whose workers die more than ``distributed.scheduler.allowed-failures`` times (Dask's setting,
3 by default) is not tried again: :func:`gather` then raises an :class:`InputError` naming the shard, before
anything is written. Work a task sends back is whole or absent: no shard's result is ever half there.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .errors import InputError

CONNECT_SECONDS = 10  # an unreachable scheduler is named after this long
WORKER_WAIT_SECONDS = 30  # a reachable scheduler without any worker is refused after this long
_SHARD_KEY = re.compile(r"-shard-(\d+)-")  # task keys name their shard: "<what>-shard-00002-<unique>"
Progress = Callable[[str], None] | None  # receives one line at a time (the commands print it)


def _distributed(field: str):
    try:
        import distributed
    except ImportError:
        raise InputError("sharded runs need Dask: pip install 'retrieval-lab[distributed]'", field=field) from None
    return distributed


def spans(n: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of ``shards`` contiguous parts of ``n`` items, in order; sizes differ by at most one (the
    larger first)."""
    base, extra = divmod(n, shards)
    bounds = [k * base + min(k, extra) for k in range(shards + 1)]
    return list(itertools.pairwise(bounds))


def local_workers(shards: int) -> int:
    """A LocalCluster's worker processes: one per shard, at most one per core."""
    return max(1, min(shards, os.cpu_count() or 1))


@contextlib.contextmanager
def client_for(scheduler: str | None, shards: int, field: str) -> Iterator[Any]:
    """A ``distributed.Client`` of the cluster at ``scheduler``, or of a LocalCluster started for this block.

    An address that cannot be reached, or a scheduler without a worker, is an InputError naming ``field`` (the
    param that gave the address), one line, no traceback.
    """
    distributed = _distributed(field)
    if scheduler is None:
        with distributed.LocalCluster(n_workers=local_workers(shards), threads_per_worker=1, processes=True,
                                      dashboard_address=":0", worker_dashboard_address=None,
                                      silence_logs=logging.CRITICAL) as cluster, \
                distributed.Client(cluster, set_as_default=False) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout=f"{CONNECT_SECONDS}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {reason}", field=field) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
        except (TimeoutError, OSError):
            raise InputError(f"the Dask scheduler at {scheduler} has no worker after {WORKER_WAIT_SECONDS} s",
                             field=field) from None
        yield client


def task_key(what: str, shard: int) -> str:
    """A unique task key that names its shard (messages and progress read it back)."""
    import uuid

    return f"{what}-shard-{shard:05d}-{uuid.uuid4().hex}"


def _shard_of(key: Any) -> str:
    found = _SHARD_KEY.search(str(key))
    return f"shard-{int(found.group(1)):05d}" if found else f"task {key}"


def _refusal(exc: BaseException) -> InputError | None:
    """The InputError a lost worker or scheduler becomes; None for any other error (raised as it is)."""
    from distributed.scheduler import KilledWorker

    if isinstance(exc, KilledWorker):  # the scheduler's own count, whatever this process's dask config says
        allowed = exc.allowed_failures
        return InputError(f"{_shard_of(exc.task)}: its worker died {allowed + 1} times while running it "
                          f"(distributed.scheduler.allowed-failures: {allowed}); run refused, nothing written")
    import asyncio
    import concurrent.futures

    if isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError)):
        return InputError(f"the Dask cluster cancelled a task ({str(exc) or type(exc).__name__}); run refused, "
                          "nothing written")
    if isinstance(exc, OSError) and "comm" in type(exc).__module__:  # CommClosedError: the scheduler went away
        return InputError(f"lost the Dask scheduler ({exc}); run refused, nothing written")
    return None


def _raise_for(future) -> None:
    exc = future.exception()
    if exc is not None:
        raise _refusal(exc) or exc


def _as_completed(distributed, futures: Sequence):
    """The futures as they end (their client's loop: the client is not the process's default)."""
    return distributed.as_completed(futures, loop=futures[0].client.loop) if futures else []


def _removals(client) -> list[dict]:
    """The scheduler's record of the workers it lost, in order (Dask's "remove-worker" events)."""
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - only a progress note depends on it
        return []
    return [e for _, e in events if isinstance(e, dict) and e.get("action") == "remove-worker"]


def _follow(futures: Sequence, fetch: bool, progress: Progress, verb: str) -> list:
    distributed = _distributed("--shards")
    if not futures:
        return []
    client = futures[0].client
    position = {future.key: i for i, future in enumerate(futures)}
    values: list = [None] * len(futures)
    known = len(_removals(client)) if progress is not None else 0
    start, finished = time.perf_counter(), 0
    try:
        for future in _as_completed(distributed, futures):
            if future.status != "finished":
                _raise_for(future)
            i = position[future.key]
            if fetch:
                values[i] = future.result()
            finished += 1
            if progress is not None:
                for removed in _removals(client)[known:]:  # a retry is said, not only done
                    known += 1
                    if not removed.get("expected"):
                        lost = sorted({_shard_of(k) for k in (*removed.get("processing-tasks", ()),
                                                               *removed.get("lost-computed-tasks", ()))})
                        progress(f"worker {removed.get('worker')} died; what it ran or held is run again elsewhere"
                                 f" ({', '.join(lost) or 'nothing of this run'})")
                progress(f"shard-{i:05d} {verb} ({finished} of {len(futures)}, {time.perf_counter() - start:.1f} s)")
    except InputError:
        raise
    except BaseException as exc:  # noqa: BLE001 - mapped, or raised as it is
        raise _refusal(exc) or exc from None
    return values


def wait_each(futures: Sequence, progress: Progress = None, verb: str = "done") -> None:
    """Wait for every future without fetching its value (a shard's index stays on its worker). ``progress`` gets
    a line per shard as it ends ("shard-00002 loaded (3 of 4, 1.2 s)") and one per worker lost meanwhile, whose
    tasks Dask runs again. A task that failed raises its error; one whose workers kept dying, an InputError."""
    _follow(futures, False, progress, verb)


def gather(futures: Sequence, progress: Progress = None, verb: str = "done") -> list:
    """Every future's value, in order; progress and errors as :func:`wait_each`."""
    return _follow(futures, True, progress, verb)


def worker_threads() -> int:
    """The threads of the Dask worker running this task (1 outside a worker): what a task's BLAS or torch may use."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


class HeldShards:
    """What a retriever whose shards a Dask cluster holds (``ShardedBM25``, ``ShardedDense``) does with them
    beyond searching: keep its progress lines quiet for a while, and let the shards and the cluster go.

    The class mixing it in sets ``shards`` (the futures of its shards), ``progress`` (receives a line per shard
    done, or None) and ``_resources`` (the ``contextlib.ExitStack`` holding its client, or None).
    """

    shards: list
    progress: Progress
    _resources: contextlib.ExitStack | None

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No progress lines in this block (the timing pass searches one query at a time)."""
        progress, self.progress = self.progress, None
        try:
            yield
        finally:
            self.progress = progress

    def close(self) -> None:
        """Drop the shards and leave the cluster (a LocalCluster this retriever started stops)."""
        self.shards = []
        if self._resources is not None:
            self._resources.close()
            self._resources = None
