"""The judging page's HTTP server: the page and a small JSON API over a :class:`session.Session`.

Why the standard library's ``ThreadingHTTPServer``: the app serves one person (or a few, on one machine)
a page and a dozen JSON calls; a framework would add a dependency to pin and audit for nothing it needs.
A thread per request lets two browser tabs write at once; SQLite (WAL, one ``BEGIN IMMEDIATE`` per
write) keeps every label of both.

Safety:

* it binds to 127.0.0.1 unless told otherwise (``judge.host``), and answers only requests whose Host
  header names the address it serves (a page on another site reaching it through DNS rebinding is refused);
* every URL carries a random token made at each start (``/TOKEN/``); without it every path is 404, and the
  token is never logged (the request log is off) nor sent on (``Referrer-Policy: no-referrer``);
* every write (POST) must carry the page's CSRF token in the ``X-Judge-CSRF`` header, a JSON body and, when
  the browser sends one, an Origin equal to the page's own: a form or a script on another site can do none
  of these (no CORS preflight is ever granted);
* the page's content security policy forbids every script but its own (by hash), every request but to
  itself, frames and forms; the script inserts every text with ``textContent``, never as HTML.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
import sys
import threading
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from ..core.errors import InputError
from ..core.parse import json_loads
from ..page import script_json
from .session import QUEUES, Session

SCRIPT, STYLE = "judge.js", "judge.css"
CSRF_HEADER = "X-Judge-CSRF"
MAX_BODY = 64 * 1024  # a label is a few dozen bytes


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def render_page(boot: dict) -> tuple[str, str]:
    """The page's HTML and its content security policy (its script and style allowed by hash only)."""
    script, style = f"\n{_asset(SCRIPT)}", f"\n{_asset(STYLE)}"
    csp = (f"default-src 'none'; script-src 'sha256-{_digest(script)}'; style-src 'sha256-{_digest(style)}'; "
           "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    html = "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', "<title>Judge</title>",
        '<link rel="icon" href="data:,">',  # no icon: the browser asks for none (a request without the token)
        f"<style>{style}</style>", "</head>", "<body>",
        "<noscript>The judging page needs JavaScript.</noscript>", '<div id="app"></div>',
        f'<script type="application/json" id="judge-data">{script_json(boot)}</script>',
        f"<script>{script}</script>", "</body>", "</html>", ""])
    return html, csp


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class JudgeServer(ThreadingHTTPServer):
    """Serves one session at ``url`` (its token inside) until shut down."""

    daemon_threads = True

    def __init__(self, session: Session, host: str = "127.0.0.1", port: int = 0):
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), Handler)
        self.session = session
        self.token = secrets.token_urlsafe(24)  # 192 random bits, new at each start
        self.csrf = secrets.token_urlsafe(24)
        self.host = host
        self.port = self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.origin = f"http://{shown}:{self.port}"
        # the Host headers answered: on the loopback, this address's names only (a page elsewhere reaching
        # 127.0.0.1 through a name of its own is refused); on another address, any (the token still guards)
        self.hosts = ({f"{shown}:{self.port}", f"localhost:{self.port}", f"127.0.0.1:{self.port}"}
                      if is_loopback(host) else None)
        boot = {"csrf": self.csrf, "labels": session.store.labels.to_json(), "assessors": list(session.assessors()),
                "queues": list(QUEUES), "comparison": None if session.comparison is None else {
                    "base": session.comparison.base_name, "head": session.comparison.head_name,
                    "measure": session.comparison.measure, "depth": session.comparison.depth},
                "pairs": len(session.pool.items), "whole_texts": session.pool.whole_texts,
                "database": session.store.path.name}
        self.html, self.csp = render_page(boot)

    @property
    def url(self) -> str:
        return f"{self.origin}/{self.token}/"


def _pair(body: dict) -> tuple[str, str]:
    q, d = body.get("query_id"), body.get("doc_id")
    if not isinstance(q, str) or not isinstance(d, str):
        raise InputError("expected query_id and doc_id strings", field="doc_id")
    return q, d


def _label(body: dict) -> int:
    label = body.get("label")
    if not isinstance(label, int) or isinstance(label, bool):
        raise InputError(f"label {label!r} is not an integer", field="label")
    return label


class Handler(BaseHTTPRequestHandler):
    server: JudgeServer
    server_version = "retrieval-lab-judge"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:
        pass  # a request line holds the token: nothing is logged

    # ------------------------------------------------------------------ plumbing

    def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None) -> None:
        self.send_response(status)
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), "Cache-Control": "no-store",
                   "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                   "X-Frame-Options": "DENY", "Cross-Origin-Resource-Policy": "same-origin", **(extra or {})}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8"),
                   "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self.close_connection = True  # a refused request's body may be unread: this connection is done
        self._json(status, {"error": message})

    def _route(self) -> tuple[str, dict[str, list[str]]] | None:
        """The path after the token and the query's parameters; None when the request was answered here."""
        if self.server.hosts is not None and self.headers.get("Host", "") not in self.server.hosts:
            self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            return None
        parts = urlsplit(self.path)
        segments = parts.path.split("/", 2)  # "", token, rest
        token = segments[1] if len(segments) > 1 else ""
        if not hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self.server.token.encode("ascii")):
            self._error(HTTPStatus.NOT_FOUND, "not found")
            return None
        if len(segments) == 2:  # /TOKEN without its slash: the page's relative API paths need it
            self._send(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain",
                       {"Location": f"/{self.server.token}/" + (f"?{parts.query}" if parts.query else "")})
            return None
        return segments[2], parse_qs(parts.query)

    def _body(self) -> dict | None:
        if not hmac.compare_digest(self.headers.get(CSRF_HEADER, "").encode("utf-8", "surrogateescape"),
                                   self.server.csrf.encode("ascii")):
            self._error(HTTPStatus.FORBIDDEN, f"missing or wrong {CSRF_HEADER} header")
            return None
        origin = self.headers.get("Origin")
        if origin is not None and origin != f"http://{self.headers.get('Host', '')}":  # same origin only
            self._error(HTTPStatus.FORBIDDEN, "request from another origin")
            return None
        if self.headers.get_content_type() != "application/json":
            self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "expected a JSON body")
            return None
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return None
        if not 0 <= length <= MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes")
            return None
        try:
            body = json_loads(self.rfile.read(length).decode("utf-8"), "body")
        except (UnicodeDecodeError, json.JSONDecodeError):
            self._error(HTTPStatus.BAD_REQUEST, "malformed JSON")
            return None
        except InputError as exc:  # nested past the recursion limit (was a RecursionError: no answer), a huge number
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return None
        if not isinstance(body, dict):
            self._error(HTTPStatus.BAD_REQUEST, "expected a JSON object")
            return None
        return body

    def _answer(self, work) -> None:
        try:
            self._json(HTTPStatus.OK, work())
        except InputError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except ConnectionError:  # the tab went away before its answer: whatever it asked is done or not begun
            self.close_connection = True
        except Exception:  # noqa: BLE001 - a bug: one line to the page, the traceback on the server's stderr
            traceback.print_exc(file=sys.stderr)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error (see the server's output)")

    # ------------------------------------------------------------------ methods

    def do_GET(self) -> None:  # http.server's names
        routed = self._route()
        if routed is None:
            return
        path, query = routed
        session = self.server.session

        def one(name: str, default: str | None = None) -> str | None:
            return query.get(name, [default])[-1]

        reveal = one("reveal") == "1"
        if path == "":
            self._send(HTTPStatus.OK, self.server.html.encode("utf-8"), "text/html; charset=utf-8",
                       {"Content-Security-Policy": self.server.csp})
        elif path == "api/next":
            self._answer(lambda: session.view(one("assessor", ""), one("queue", "pool"), reveal).to_json())
        elif path == "api/item":
            self._answer(lambda: session.view(one("assessor", ""), one("queue", "pool"), reveal,
                                              (one("query_id", ""), one("doc_id", ""))).to_json())
        elif path == "api/agreement":
            self._answer(lambda: session.agreement().to_json())
        elif path == "api/sensitivity":
            def report() -> dict:
                out = session.sensitivity().to_json()
                if not reveal:  # which run ranks what stays hidden while judging blind
                    out["candidates"] = []
                return out
            self._answer(report)
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def do_POST(self) -> None:
        routed = self._route()
        if routed is None:
            return
        path, _ = routed
        body = self._body()
        if body is None:
            return
        session = self.server.session

        def then(row, pair=None) -> dict:
            view = session.view(body.get("assessor", ""), body.get("queue", "pool"), body.get("reveal") is True, pair)
            return {"row": None if row is None else row.to_json(), "view": view.to_json()}

        if path == "api/label":
            self._answer(lambda: then(session.label(body.get("assessor", ""), _pair(body), _label(body))))
        elif path == "api/skip":
            self._answer(lambda: then(session.skip(body.get("assessor", ""), _pair(body))))
        elif path == "api/undo":
            def undo() -> dict:
                row_id = body.get("id")
                if row_id is not None and (not isinstance(row_id, int) or isinstance(row_id, bool)):
                    raise InputError(f"id {row_id!r} is not an integer", field="id")
                row = session.undo(body.get("assessor", ""), row_id)
                return then(row, None if row is None or row.kind == "adjudicate" else row.pair)
            self._answer(undo)
        elif path == "api/adjudicate":
            self._answer(lambda: {"row": session.adjudicate(body.get("adjudicator", ""), _pair(body),
                                                            _label(body)).to_json()})
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def do_HEAD(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD  # no preflight is ever granted


def start(session: Session, host: str = "127.0.0.1", port: int = 0) -> JudgeServer:
    """A server answering in a background thread (tests, notebooks); ``shutdown()`` then ``server_close()``."""
    server = JudgeServer(session, host, port)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="judge-server",
                     daemon=True).start()
    return server
