"""Your own retriever as a pipeline retriever (params ``external.<name>``): a Python callable or an HTTP endpoint.

The contract (docs/own-retriever.md):

- callable ``module:function``, imported from ``path`` only because params name it, called as
  ``function(texts, k)`` (or ``function(texts, k, ids=ids)`` when it takes ``ids``) with a batch of
  ``batch_size`` query texts; it returns one ranked list per query, best first, of doc ids or
  ``(doc_id, score)`` pairs;
- endpoint ``url``: ``POST {"k": k, "queries": [{"id": qid, "text": text}, ...]}``, answered
  ``200 {"results": [{"id": qid, "hits": [{"id": doc_id, "score": s}, ...]}, ...]}`` (``score``
  optional), with ``Authorization: Bearer $<token_env>`` when ``token_env`` is set.

Failure policy: a call that raises, times out (``timeout``), cannot connect, answers 5xx/429 after
``retries`` (HTTP, ``backoff`` doubling) or redirects to another origin fails its queries; each is
named with its reason in the --timing file. The run is written only when the failed share is at most
``max_failed``. An answer of the wrong shape (not JSON, a list of the wrong length, an id that is not
text) is bad input: one line naming the retriever and the field, no run. A list naming a document
twice fails that query (which rank would count?). Ids not in the corpus are left out and counted;
a list whose scores are absent, non-finite or not decreasing is scored by rank (counted): the
system's order is always kept. The credential is read from the environment, never written, and
never sent to another origin (scheme, host, port): a redirect there is not followed.
"""

from __future__ import annotations

import http.client
import importlib
import inspect
import itertools
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import numpy as np

from ..core.data import id_problem
from ..core.errors import InputError
from ..core.params import ExternalRetriever as ExternalSpec
from ..core.params import Params
from ..latency import Timing
from ..runs import Run

MAX_REDIRECTS = 3
EXAMPLES = 5  # ids named per kind of problem in the timing file (the counts are always whole)
_REASON_CHARS = 200


class _CallFailed(Exception):
    """A call that did not answer (its queries fail); ``retry``: worth another HTTP attempt."""

    def __init__(self, reason: str, retry: bool = False):
        super().__init__(reason)
        self.retry = retry


class _BadAnswer(Exception):
    """An answer breaking the contract: bad input, the whole run stops. ``field`` names where."""

    def __init__(self, reason: str, field: str):
        super().__init__(reason)
        self.field = field


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _REASON_CHARS else line[:_REASON_CHARS - 3] + "..."


def _with_deadline(fn, timeout: float):
    """``fn()``'s value, or _CallFailed after ``timeout`` seconds (the call is abandoned on a daemon thread:
    Python cannot stop it, and it must not hold the process open)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  carried to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise _CallFailed(f"timed out after {timeout:g} s", retry=True)
    if "error" in box:
        raise box["error"]
    return box["value"]


# ----------------------------------------------------------------------------- the two kinds of call


class _CallableBackend:
    kind = "callable"

    def __init__(self, name: str, spec: ExternalSpec):
        field = f"external.{name}.callable"
        root = Path(spec.path)
        if not root.exists():
            raise InputError("no such file or folder", spec.path, field=f"external.{name}.path")
        folder = str((root if root.is_dir() else root.parent).resolve())
        module_name, function_name = spec.callable.split(":")
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded = sys.modules.get(module_name)
        if loaded is not None and not str(getattr(loaded, "__file__", "") or "").startswith(folder):
            del sys.modules[module_name]  # another folder's module of that name: import the one params name
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise InputError(f"cannot import {module_name!r} from {folder} ({exc})", field=field) from None
        except Exception as exc:  # noqa: BLE001  the user's module failed while importing
            raise InputError(f"importing {module_name!r} raised {type(exc).__name__}: {_one_line(exc)}",
                             field=field) from None
        fn = getattr(module, function_name, None)
        if not callable(fn):
            raise InputError(f"{module_name!r} has no function {function_name!r}", field=field)
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None
        self.takes_ids = signature is not None and ("ids" in signature.parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()))
        if signature is not None:
            try:
                signature.bind(["query"], 1, **({"ids": ["q"]} if self.takes_ids else {}))
            except TypeError:
                raise InputError(f"{spec.callable}{signature} cannot be called as function(texts, k)",
                                 field=field) from None
        self.fn, self.spec, self.name = fn, spec, name

    def call(self, texts: list[str], ids: list[str], k: int) -> list:
        """One ranked list per query, in the batch's order (its shape checked by :func:`_lists`)."""
        kwargs = {"ids": list(ids)} if self.takes_ids else {}
        try:
            answer = _with_deadline(lambda: self.fn(list(texts), k, **kwargs), self.spec.timeout)
        except _CallFailed:
            raise
        except Exception as exc:  # noqa: BLE001  the user's function raised: its queries fail
            raise _CallFailed(f"raised {type(exc).__name__}: {_one_line(exc)}") from None
        if not isinstance(answer, (list, tuple)) or len(answer) != len(texts):
            got = f"{len(answer)} items" if isinstance(answer, (list, tuple)) else type(answer).__name__
            raise _BadAnswer(f"expected a list of {len(texts)} ranked lists (one per query), got {got}",
                             "return value")
        return [_hits_of(item, f"return value[{i}]") for i, item in enumerate(answer)]


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    return f"{scheme}://{host}:{port}"


class _HttpBackend:
    kind = "http"

    def __init__(self, name: str, spec: ExternalSpec):
        self.token = None
        if spec.token_env is not None:
            self.token = os.environ.get(spec.token_env)
            if not self.token:
                raise InputError(f"the environment variable {spec.token_env} is not set (or empty)",
                                 field=f"external.{name}.token_env")
        self.spec, self.name = spec, name

    def _attempt(self, body: bytes) -> bytes:
        url, hops = self.spec.url, 0
        while True:
            parts = urlsplit(url)
            cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            conn = cls(parts.hostname, parts.port, timeout=self.spec.timeout)
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self.token is not None and _origin(url) == _origin(self.spec.url):  # never to another origin
                headers["Authorization"] = f"Bearer {self.token}"
            try:
                conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body, headers)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                raise _CallFailed(f"timed out after {self.spec.timeout:g} s", retry=True) from None
            except (OSError, http.client.HTTPException) as exc:
                raise _CallFailed(f"connection failed ({type(exc).__name__}: {_one_line(exc)})", retry=True) from None
            finally:
                conn.close()
            if response.status in (301, 302, 303, 307, 308):
                location = response.getheader("Location")
                if not location:
                    raise _CallFailed(f"HTTP {response.status} without a Location")
                target = urljoin(url, location)
                if _origin(target) != _origin(self.spec.url):
                    raise _CallFailed(f"redirected to another origin ({_origin_text(target)}): not followed, so "
                                      f"nothing (no credential) leaves {_origin_text(self.spec.url)}")
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise _CallFailed(f"more than {MAX_REDIRECTS} redirects")
                url = target
                continue
            if response.status == 200:
                return data
            raise _CallFailed(f"HTTP {response.status}", retry=response.status >= 500 or response.status == 429)

    def call(self, texts: list[str], ids: list[str], k: int) -> list:
        body = json.dumps({"k": k, "queries": [{"id": q, "text": t} for q, t in zip(ids, texts)]}).encode()
        delay, attempt = self.spec.backoff, 0
        while True:
            try:
                data = _with_deadline(lambda: self._attempt(body), self.spec.timeout)
                break
            except _CallFailed as exc:
                if not exc.retry or attempt >= self.spec.retries:
                    reason = str(exc) if attempt == 0 else f"{exc} (after {attempt + 1} attempts)"
                    raise _CallFailed(reason) from None
                time.sleep(delay)
                delay, attempt = delay * 2, attempt + 1
        return _response_lists(data, ids)


def _response_lists(data: bytes, ids: list[str]) -> list:
    """One hit list per asked query (None: the response left it out), from the endpoint's JSON."""
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _BadAnswer(f"not JSON ({exc.msg if hasattr(exc, 'msg') else exc})", "response") from None
    results = obj.get("results") if isinstance(obj, dict) else None
    if not isinstance(results, list):
        raise _BadAnswer("expected an object with a list 'results'", "response.results")
    found: dict[str, list] = {}
    for i, item in enumerate(results):
        where = f"response.results[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise _BadAnswer('expected {"id": query id, "hits": [...]}', f"{where}.id")
        if "hits" not in item:
            raise _BadAnswer("missing", f"{where}.hits")
        found[item["id"]] = _hits_of(item["hits"], f"{where}.hits")
    return [found.get(q) for q in ids]


def _hits_of(item, where: str) -> list[tuple[str, float | None]]:
    """(doc id, score or None) pairs of one ranked list: ids, [id, score] pairs or {"id", "score"} objects."""
    if not isinstance(item, (list, tuple)):
        raise _BadAnswer(f"expected a ranked list, got {type(item).__name__}", where)
    hits = []
    for j, hit in enumerate(item):
        if isinstance(hit, str):
            doc, score = hit, None
        elif isinstance(hit, dict):
            doc, score = hit.get("id"), hit.get("score")
        elif isinstance(hit, (list, tuple)) and len(hit) == 2:
            doc, score = hit
        else:
            raise _BadAnswer("expected a doc id, a (doc_id, score) pair or {\"id\", \"score\"}", f"{where}[{j}]")
        if not isinstance(doc, str) or not doc or id_problem(doc):
            raise _BadAnswer(f"document id {doc!r} is not a non-empty word", f"{where}[{j}].id")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise _BadAnswer(f"score {score!r} is not a number", f"{where}[{j}].score")
        hits.append((doc, None if score is None else float(score)))
    return hits


# ----------------------------------------------------------------------------- checking one answer


@dataclass
class _Tally:
    unknown: int = 0
    unknown_examples: list | None = None
    non_finite: int = 0
    scored_by_rank: int = 0
    truncated: int = 0

    def __post_init__(self):
        self.unknown_examples = []


def _ranked_docs(hits: list[tuple[str, float | None]], k: int, corpus: Container[str], qid: str,
                 tally: _Tally) -> dict[str, float]:
    """The query's run entry in the system's order; raises _CallFailed on a repeated document."""
    seen = set()
    for doc, _ in hits:
        if doc in seen:
            raise _CallFailed(f"document {doc!r} returned twice (refused: which rank counts?)")
        seen.add(doc)
    if len(hits) > k:
        tally.truncated += 1
        hits = hits[:k]
    kept = []
    for doc, score in hits:
        if doc not in corpus:
            tally.unknown += 1
            if len(tally.unknown_examples) < EXAMPLES:
                tally.unknown_examples.append([qid, doc])
            continue
        kept.append((doc, score))
    scores = [s for _, s in kept]
    tally.non_finite += sum(s is not None and not math.isfinite(s) for s in scores)
    usable = all(s is not None and math.isfinite(s) for s in scores) and all(
        a >= b for a, b in itertools.pairwise(scores))
    if not usable:
        tally.scored_by_rank += bool(kept)
        scores = [float(len(kept) - i) for i in range(len(kept))]
    out: dict[str, float] = {}
    previous = math.inf
    for (doc, _), score in zip(kept, scores):
        if score >= previous:  # a tie: one ulp down keeps the system's order (trec_eval breaks ties by id)
            score = float(np.nextafter(previous, -np.inf))
        out[doc] = previous = score
    return out


# ----------------------------------------------------------------------------- the retriever


@dataclass(frozen=True)
class Collected:
    """What the calls gave: the run (answered queries), the timing, and every failure and count."""

    run: Run
    timing: Timing
    failed: dict[str, str]  # query id -> reason

    @property
    def failed_share(self) -> float:
        total = len(self.run) + len(self.failed)
        return len(self.failed) / total if total else 0.0


class ExternalRetriever:
    """The user's retriever named ``name`` under params ``external``; answers :meth:`search` like the others."""

    name = "external"
    needs = "dataset"

    def __init__(self, name: str, spec: ExternalSpec, corpus: Container[str], k: int):
        self.run_name, self.spec, self.corpus, self.k = name, spec, corpus, k
        self.backend = _CallableBackend(name, spec) if spec.callable else _HttpBackend(name, spec)

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None, external: str | None = None,
                    depth: int | None = None) -> ExternalRetriever:
        if external is None or external not in params.external:
            known = ", ".join(params.external) or "none in params.yaml"
            raise InputError(f"name one of params' external retrievers with --external ({known})",
                             field="--external")
        if dataset is None:
            raise InputError("an external retriever reads the queries and the corpus: give --dataset",
                             field="--dataset")
        spec = params.external[external]
        # an explicit depth (retrieve --depth) wins over the retriever's k, which wins over retrieve.depth
        return cls(external, spec, dataset.corpus, depth or spec.k or params.retrieve.depth)

    def _field(self, key: str) -> str:
        return f"external.{self.run_name}.{key}"

    def collect(self, queries: dict[str, str]) -> Collected:
        """Call the retriever for every query (``concurrency`` calls in flight); nothing is dropped unsaid."""
        qids = list(queries)
        size = self.spec.batch_size
        batches = queue.SimpleQueue()
        for start in range(0, len(qids), size):
            batches.put(qids[start:start + size])
        answers: dict[str, dict[str, float]] = {}
        failed: dict[str, str] = {}
        seconds: dict[str, float] = {}
        tally, lock, fatal = _Tally(), threading.Lock(), []

        def worker():
            while not fatal:
                try:
                    batch = batches.get_nowait()
                except queue.Empty:
                    return
                began = time.perf_counter()
                try:
                    lists = self.backend.call([queries[q] for q in batch], batch, self.k)
                except _CallFailed as exc:
                    with lock:
                        failed.update({q: str(exc) for q in batch})
                    continue
                except _BadAnswer as exc:
                    fatal.append(exc)
                    return
                took = time.perf_counter() - began
                with lock:
                    for qid, hits in zip(batch, lists):
                        if hits is None:
                            failed[qid] = "not in the response"
                            continue
                        try:
                            answers[qid] = _ranked_docs(hits, self.k, self.corpus, qid, tally)
                            seconds[qid] = took
                        except _CallFailed as exc:
                            failed[qid] = str(exc)

        start = time.perf_counter()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(self.spec.concurrency, len(qids)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        if fatal:
            where = self._field("url" if self.backend.kind == "http" else "callable")
            raise InputError(f"{fatal[0]} (at {fatal[0].field}); no run written", field=where)
        calls = {"kind": self.backend.kind, "k": self.k, "batch_size": size, "timeout_s": self.spec.timeout,
                 "retries": self.spec.retries if self.backend.kind == "http" else 0,
                 "queries": len(qids), "answered": len(answers), "failed": len(failed),
                 "failed_share": len(failed) / len(qids) if qids else 0.0, "max_failed": self.spec.max_failed,
                 "failures": {q: failed[q] for q in sorted(failed)},
                 "unknown_ids": tally.unknown, "unknown_id_examples": tally.unknown_examples,
                 "non_finite_scores": tally.non_finite, "queries_scored_by_rank": tally.scored_by_rank,
                 "answers_longer_than_k": tally.truncated}
        scope = ("one call to the user's function" if self.backend.kind == "callable"
                 else "one HTTP request, retries and backoff included")
        if size > 1:
            scope += f" (a batch of up to {size} queries: each query gets its batch's time)"
        timing = Timing(self.run_name, scope, self.spec.concurrency, {q: seconds[q] for q in qids if q in seconds},
                        wall, calls=calls)
        return Collected({q: answers[q] for q in qids if q in answers}, timing, failed)

    def check(self, collected: Collected) -> None:
        """Refuse a run whose failed share exceeds ``max_failed`` (one line, the first failures named)."""
        if not collected.run and collected.failed:  # a run of no query would pass for a measured one
            first = "; ".join(f"{q}: {why}" for q, why in sorted(collected.failed.items())[:3])
            raise InputError(f"no query was answered ({len(collected.failed)} failed): {first}; no run written",
                             field=self._field("max_failed"))
        if collected.failed_share <= self.spec.max_failed:
            return
        first = "; ".join(f"{q}: {why}" for q, why in sorted(collected.failed.items())[:3])
        total = len(collected.run) + len(collected.failed)
        raise InputError(f"{len(collected.failed)} of {total} queries failed ({collected.failed_share:.1%} > "
                         f"{self.spec.max_failed:.1%} allowed): {first}; no run written",
                         field=self._field("max_failed"))

    def search(self, queries: dict[str, str], depth: int | None = None) -> Run:
        collected = self.collect(queries)
        self.check(collected)
        return collected.run
