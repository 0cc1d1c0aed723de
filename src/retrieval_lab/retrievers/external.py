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

Accounting: every query sent ends answered or failed. Whatever the user's code raises on a call
(``SystemExit`` and ``sys.exit()`` included, or a list whose iteration raises) fails that call's
queries; only ``KeyboardInterrupt`` stops the run, and the command exits non-zero with nothing written.
A run whose answered and failed queries do not add up to the queries sent is refused. A call that changes the
working folder (``os.chdir``) fails its queries, the folder set back (an import that does is refused); the command
writes its files where it checked them.

HTTP: one attempt's deadline (``timeout``) covers connecting, the headers and the whole body, read in
chunks on the calling thread (a watchdog closes the socket at the deadline): an endless body stops,
and no reader is left behind. A body over :data:`MAX_RESPONSE_BYTES` or nested deeper than JSON's
recursion limit is a bad answer. The token is checked when read (one line of printable ASCII, or one
line naming the variable, never its value) and redacted from every reason, count and example, even
when an endpoint sends it back as a document id.

The callable's module is imported from ``path`` with that folder on ``sys.path`` only while it imports,
and last there: a file beside it named like a standard module (``signal.py``) shadows nothing, then
or later.
"""

from __future__ import annotations

import http.client
import importlib
import inspect
import itertools
import json
import math
import numbers
import os
import queue
import re
import socket
import sys
import threading
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, quote_plus, urljoin, urlsplit

import numpy as np

from ..core.data import id_problem
from ..core.errors import InputError
from ..core.params import ExternalRetriever as ExternalSpec
from ..core.params import Params
from ..core.parse import json_loads
from ..core.rules import http_url
from ..latency import Timing
from ..runs import Run

MAX_REDIRECTS = 3
EXAMPLES = 5  # ids named per kind of problem in the timing file (the counts are always whole)
_REASON_CHARS = 200
MAX_RESPONSE_BYTES = 64 << 20  # one HTTP answer: k = 1,000 hits for 100 queries is about 5 MB
_READ_CHUNK = 1 << 16
REDACTED = "[token redacted]"


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


def _text_of(obj) -> str:
    """``str(obj)``, or a note saying it could not be had: the user's exception may be one whose ``__str__`` raises
    (or returns no string), and its message must not become a traceback of ours."""
    try:
        text = str(obj)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  SystemExit included: a message is not worth the process
        return f"<its message could not be read: {type(exc).__name__}>"
    return text


def _one_line(text) -> str:
    line = " ".join(_text_of(text).split())
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
        self.home = os.getcwd()  # where every relative path of the command was checked
        module = _import_from(folder, module_name, field)
        if (moved := _moved_from(self.home)) is not None:
            raise InputError(f"importing {module_name!r} changed the working folder ({moved}); set back: a "
                             "retriever must not move the command's files", field=field)
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

    def redact(self, text: str) -> str:
        return text

    def call(self, texts: list[str], ids: list[str], k: int) -> list:
        """One ranked list per query, in the batch's order (its shape checked by :func:`_lists`)."""
        kwargs = {"ids": list(ids)} if self.takes_ids else {}
        try:
            answer = _with_deadline(lambda: self.fn(list(texts), k, **kwargs), self.spec.timeout)
        except (_CallFailed, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001  the user's function raised (SystemExit too): its queries fail
            raise _CallFailed(f"raised {type(exc).__name__}: {_one_line(exc)}") from None
        finally:
            moved = _moved_from(self.home)
        if moved is not None:  # the process's working folder is every thread's: the answer cannot be trusted either
            raise _CallFailed(f"changed the working folder ({moved}); set back")
        try:  # the answer is the user's object: its len() or iteration may raise too
            if not isinstance(answer, (list, tuple)) or len(answer) != len(texts):
                got = f"{len(answer)} items" if isinstance(answer, (list, tuple)) else type(answer).__name__
                raise _BadAnswer(f"expected a list of {len(texts)} ranked lists (one per query), got {got}",
                                 "return value")
            return [_hits_of(item, f"return value[{i}]") for i, item in enumerate(answer)]
        except (_BadAnswer, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001
            raise _CallFailed(f"its answer raised {type(exc).__name__} when read: {_one_line(exc)}") from None


def _moved_from(home: str) -> str | None:
    """None while the working folder is ``home``; else where the user's code moved it (``os.chdir``), after setting
    it back, so that the command writes where it checked."""
    try:
        now = os.getcwd()
    except OSError:  # moved into a folder since removed
        now = "a folder since removed"
    if now == home:
        return None
    os.chdir(home)
    return f"to {now}"


_IMPORTED: dict[str, str] = {}  # module name -> the folder this module imported it from


def _import_from(folder: str, module_name: str, field: str):
    """The user's module ``module_name`` from ``folder``: the folder is on ``sys.path`` while it imports, last
    (the standard library and installed packages come first, so a ``signal.py`` beside it shadows nothing),
    and taken off again, so no later import of the project's finds anything there."""
    if _IMPORTED.get(module_name) not in (None, folder):  # another folder's module of that name (ours): import
        for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
            del sys.modules[name]  # the one params name now
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise InputError(f"cannot import {module_name!r} from {folder} ({exc})", field=field) from None
    except Exception as exc:  # noqa: BLE001  the user's module failed while importing
        raise InputError(f"importing {module_name!r} raised {type(exc).__name__}: {_one_line(exc)}",
                         field=field) from None
    finally:
        if added:
            while folder in sys.path:
                sys.path.remove(folder)
            sys.path_importer_cache.pop(folder, None)
    where = str(getattr(module, "__file__", "") or "")
    if not os.path.realpath(where).startswith(folder + os.sep):
        raise InputError(f"{module_name!r} is the module {where or 'built into Python'}, not one in {folder}: "
                         "rename your module", field=field)
    _IMPORTED[module_name] = folder
    return module


def _spellings(token: str) -> re.Pattern:
    """Every spelling of ``token`` a message may hold, compared case-blind (a host name is lowercased): as is,
    escaped as repr() and JSON escape it (a backslash doubled, a quote escaped) and percent-encoded, each
    also inside one more such quoting (a reason quoted in a reason)."""
    forms = {token}
    for _ in range(2):
        for form in list(forms):
            escaped = form.replace("\\", "\\\\")
            forms |= {escaped, escaped.replace("'", "\\'"), escaped.replace('"', '\\"'), quote(form, safe=""),
                      quote(form), quote_plus(form)}
    return re.compile("|".join(map(re.escape, sorted(forms, key=len, reverse=True))), re.IGNORECASE)


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
            self.token = _read_token(spec.token_env, f"external.{name}.token_env")
            self._token_pattern = _spellings(self.token)
        self.spec, self.name = spec, name

    def redact(self, text: str) -> str:
        """``text`` without the token in any spelling a message gives it: an endpoint may echo the Authorization
        header anywhere (a hit id, a score, a redirect's host name)."""
        return self._token_pattern.sub(REDACTED, text) if self.token else text

    def _attempt(self, body: bytes) -> bytes:
        """One POST (and its same-origin redirects) within one deadline of ``timeout`` seconds for everything:
        connecting, the headers and the whole body. A watchdog closes the socket when the deadline passes,
        so a read blocked on a slow or endless body returns on this thread; no thread is left reading."""
        deadline = time.monotonic() + self.spec.timeout
        url, hops = self.spec.url, 0
        while True:
            parts = urlsplit(url)
            cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            left = deadline - time.monotonic()
            if left <= 0:
                raise _CallFailed(f"timed out after {self.spec.timeout:g} s", retry=True)
            conn = cls(parts.hostname, parts.port, timeout=left)
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self.token is not None and _origin(url) == _origin(self.spec.url):  # never to another origin
                headers["Authorization"] = f"Bearer {self.token}"
            expired, sockets = threading.Event(), []
            watchdog = threading.Timer(left, _close_at_deadline, (conn, sockets, expired))
            watchdog.daemon = True
            watchdog.start()
            try:
                conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body, headers)
                # an answer that will close the connection (HTTP/1.0, Connection: close) takes the socket along and
                # getresponse forgets it (conn.sock = None): the watchdog keeps its own hold on it
                sockets.append(conn.sock)
                response = conn.getresponse()
                data = _read_body(response, deadline)
            except _BadAnswer:
                raise
            except (OSError, http.client.HTTPException, _Deadline) as exc:
                if expired.is_set() or isinstance(exc, (TimeoutError, _Deadline)):
                    raise _CallFailed(f"timed out after {self.spec.timeout:g} s", retry=True) from None
                raise _CallFailed(f"connection failed ({type(exc).__name__}: {_one_line(self.redact(_text_of(exc)))})",
                                  retry=True) from None
            finally:
                watchdog.cancel()
                conn.close()
            if expired.is_set():  # the body may have ended early only because the watchdog closed it
                raise _CallFailed(f"timed out after {self.spec.timeout:g} s", retry=True)
            if response.status in (301, 302, 303, 307, 308):
                location = response.getheader("Location")
                if not location:
                    raise _CallFailed(f"HTTP {response.status} without a Location")
                try:
                    target = urljoin(url, location)
                except ValueError:  # an unclosed [ of an IPv6 host
                    target = "["
                if (why := http_url(target)) is not None:  # a port past 65535, credentials, not http: not followed
                    raise _CallFailed(f"redirected to an invalid URL ({why}): not followed")
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
                data = self._attempt(body)
                break
            except _CallFailed as exc:
                if not exc.retry or attempt >= self.spec.retries:
                    reason = str(exc) if attempt == 0 else f"{exc} (after {attempt + 1} attempts)"
                    raise _CallFailed(reason) from None
                time.sleep(delay)
                delay, attempt = delay * 2, attempt + 1
        return _response_lists(data, ids)


class _Deadline(Exception):
    """The attempt's deadline passed while its body was still coming."""


def _close_at_deadline(conn: http.client.HTTPConnection, sockets: list, expired: threading.Event) -> None:
    """The watchdog: mark the attempt expired and shut its socket, waking a read blocked on it (the connection's,
    or the one its response took: whatever the body's framing, a read on it returns)."""
    expired.set()
    for sock in (conn.sock, *sockets):
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read_body(response: http.client.HTTPResponse, deadline: float) -> bytes:
    """The whole body, in chunks, before ``deadline`` and within :data:`MAX_RESPONSE_BYTES`."""
    chunks, size = [], 0
    while True:
        if time.monotonic() >= deadline:
            raise _Deadline
        chunk = response.read(_READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _BadAnswer(f"longer than {MAX_RESPONSE_BYTES >> 20} MiB (read stopped)", "response")
        chunks.append(chunk)


def _read_token(variable: str, field: str) -> str:
    """The bearer token in ``variable``: one line of printable ASCII, as an HTTP header carries it. A problem is
    one line naming the variable and what is wrong, never the value (a trailing CR from a Windows file would
    otherwise reach http.client, whose error prints the header)."""
    token = os.environ.get(variable)
    if not token:
        raise InputError(f"the environment variable {variable} is not set (or empty)", field=field)
    if token.strip("\r\n") != token and token.strip("\r\n"):
        raise InputError(f"the environment variable {variable} ends or starts with a line break (CR or LF: read "
                         "from a file with Windows line endings?); a token is one line", field=field)
    bad = next((c for c in token if not 0x21 <= ord(c) <= 0x7E), None)
    if bad is not None:
        what = "a space or control character" if ord(bad) < 0x80 else "a character outside printable ASCII"
        raise InputError(f"the environment variable {variable} holds {what} (at position {token.index(bad) + 1} "
                         f"of {len(token)}); an HTTP header carries printable ASCII only", field=field)
    return token


def _response_lists(data: bytes, ids: list[str]) -> list:
    """One hit list per asked query (None: the response left it out), from the endpoint's JSON."""
    try:
        obj = json_loads(data)  # a body nested past the recursion limit, or a 5,000-digit number: bad input
    except InputError as exc:
        raise _BadAnswer(exc.reason, f"response.{exc.field}" if exc.field else "response") from None
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
        if score is not None and (isinstance(score, bool) or not isinstance(score, numbers.Real)):
            raise _BadAnswer(f"score {score!r} is not a number", f"{where}[{j}].score")  # NumPy's are numbers
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
    """What the calls gave: the run (answered queries), the timing, every failure and count, and the queries
    sent: each one answered or failed (:meth:`ExternalRetriever.check` refuses a run where that is not so)."""

    run: Run
    timing: Timing
    failed: dict[str, str]  # query id -> reason
    sent: tuple[str, ...] = ()

    @property
    def failed_share(self) -> float:
        total = len(self.sent) or len(self.run) + len(self.failed)
        return len(self.failed) / total if total else 0.0

    def lost(self) -> list[str]:
        """Queries sent that ended neither answered nor failed (none, unless the accounting broke)."""
        return [q for q in self.sent if q not in self.run and q not in self.failed]


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
        """Call the retriever for every query (``concurrency`` calls in flight); nothing is dropped unsaid.

        Whatever a call raises fails its queries (``SystemExit`` too); a ``KeyboardInterrupt`` from the user's
        code stops the run and is raised here once every call in flight is done.
        """
        qids = list(queries)
        size = self.spec.batch_size
        batches = queue.SimpleQueue()
        for start in range(0, len(qids), size):
            batches.put(qids[start:start + size])
        answers: dict[str, dict[str, float]] = {}
        failed: dict[str, str] = {}
        seconds: dict[str, float] = {}
        tally, lock, fatal, interrupted = _Tally(), threading.Lock(), [], []
        redact = self.backend.redact

        def fail(batch: list[str], reason: str) -> None:
            with lock:
                failed.update({q: redact(reason) for q in batch if q not in answers and q not in failed})

        def worker():
            while not fatal and not interrupted:
                try:
                    batch = batches.get_nowait()
                except queue.Empty:
                    return
                began = time.perf_counter()
                try:
                    lists = self.backend.call([queries[q] for q in batch], batch, self.k)
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
                                failed[qid] = redact(str(exc))
                except _CallFailed as exc:
                    fail(batch, str(exc))
                except _BadAnswer as exc:
                    fatal.append(exc)
                    fail(batch, f"bad answer: {exc}")
                    return
                except KeyboardInterrupt:
                    interrupted.append(batch)
                    fail(batch, "interrupted")
                    return
                except BaseException as exc:  # noqa: BLE001  anything else fails the batch: every query counted
                    fail(batch, f"{type(exc).__name__} while its answer was read: {_one_line(redact(_text_of(exc)))}")

        start = time.perf_counter()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(self.spec.concurrency, len(qids)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        if interrupted:
            raise KeyboardInterrupt(f"raised by {self._field('callable')}: the run stopped")
        if fatal:
            where = self._field("url" if self.backend.kind == "http" else "callable")
            raise InputError(redact(f"{fatal[0]} (at {fatal[0].field}); no run written"), field=where)
        tally.unknown_examples = [[q, redact(d)] for q, d in tally.unknown_examples]
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
        return Collected({q: answers[q] for q in qids if q in answers}, timing, failed, tuple(qids))

    def check(self, collected: Collected) -> None:
        """Refuse a run that lost a query (answered + failed != sent), that answered none, whose answers hold no
        document of the corpus (ids it does not have, or empty lists: an empty run), or whose failed share exceeds
        ``max_failed`` (one line, the first failures named)."""
        lost = collected.lost()
        if lost:
            raise InputError(f"{len(lost)} of {len(collected.sent)} queries sent were neither answered nor failed "
                             f"({', '.join(lost[:3])}): the calls lost them; no run written",
                             field=self._field("url" if self.backend.kind == "http" else "callable"))
        if not collected.run and collected.failed:  # a run of no query would pass for a measured one
            first = "; ".join(f"{q}: {why}" for q, why in sorted(collected.failed.items())[:3])
            raise InputError(f"no query was answered ({len(collected.failed)} failed): {first}; no run written",
                             field=self._field("max_failed"))
        if collected.run and not any(collected.run.values()):  # an empty run file would pass for a measured one
            calls = collected.timing.calls or {}
            examples = ", ".join(f"{q}: {d}" for q, d in (calls.get("unknown_id_examples") or [])[:3])
            raise InputError(f"no answered query got a document of the corpus ({len(collected.run)} answered: "
                             f"{calls.get('unknown_ids', 0)} ids not in the corpus left out"
                             f"{f' ({examples})' if examples else ''}, the other lists empty); no run written",
                             field=self._field("url" if self.backend.kind == "http" else "callable"))
        if collected.failed_share <= self.spec.max_failed:
            return
        first = "; ".join(f"{q}: {why}" for q, why in sorted(collected.failed.items())[:3])
        total = len(collected.sent) or len(collected.run) + len(collected.failed)
        raise InputError(f"{len(collected.failed)} of {total} queries failed ({collected.failed_share:.1%} > "
                         f"{self.spec.max_failed:.1%} allowed): {first}; no run written",
                         field=self._field("max_failed"))

    def search(self, queries: dict[str, str], depth: int | None = None) -> Run:
        collected = self.collect(queries)
        self.check(collected)
        return collected.run
