"""One pull-request comment per report, kept up to date instead of a new one on every push.

The comment starts with a hidden marker; ``upsert_comment`` finds the comment that starts
with it and edits it, or posts one when there is none. GitHub's REST API (a pull
request is an issue, so its conversation comments are issue comments):

    GET   /repos/{owner}/{name}/issues/{number}/comments?per_page=100&page=N
    POST  /repos/{owner}/{name}/issues/{number}/comments        {"body": ...}
    PATCH /repos/{owner}/{name}/issues/comments/{comment_id}     {"body": ...}

The token goes to the API URL only: https is required and redirects are refused, never
followed (urllib would send the Authorization header on to wherever they point).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Protocol
from urllib.parse import quote

from .core.errors import InputError
from .core.parse import json_loads

MARKER = "<!-- retrieval-lab-report -->"
MAX_BODY = 65536  # GitHub refuses longer comment bodies
PAGE = 100
MAX_PAGES = 100  # 10,000 comments: far more than a pull request holds


class CommentAPI(Protocol):
    def list_comments(self, number: int) -> list[dict]: ...
    def create_comment(self, number: int, body: str) -> dict: ...
    def update_comment(self, comment_id: int, body: str) -> dict: ...


# what a link to the page may be: an https URL with nothing that could end the markdown link or add markup
PAGE_URL = re.compile(r"https://[A-Za-z0-9.-]+(?:/[A-Za-z0-9._~%/?=&+-]*)?")


def page_line(url: str) -> str:
    """The comment's link to the per-query comparison page (``report.html`` in the job's artifact)."""
    if not PAGE_URL.fullmatch(url):
        raise InputError(f"expected an https URL of letters, digits and ._~%/?=&+-, got {url!r}", field="--page-url")
    return (f"**[Per-query comparison page]({url})**: report.html in the job's `pr-report` artifact "
            "(download, unzip, open in a browser: it loads nothing from anywhere).\n\n")


def comment_body(report: str, marker: str = MARKER, limit: int = MAX_BODY, page_url: str | None = None) -> str:
    """The marker, the link to the comparison page (first, so that cutting never drops it), then the
    report; cut to ``limit`` characters with a note saying so."""
    body = f"{marker}\n{page_line(page_url) if page_url else ''}{report}"
    if len(body) <= limit:
        return body
    note = "\n\n… (cut to fit a comment: the full report.md is in the job's artifacts)\n"
    return body[:limit - len(note)] + note


def upsert_comment(api: CommentAPI, number: int, report: str, marker: str = MARKER,
                   page_url: str | None = None) -> tuple[str, int]:
    """Edit the comment of pull request ``number`` that starts with ``marker``, or post one.

    Returns ("created" | "updated" | "unchanged", comment id). A comment merely quoting the
    marker (a reply) does not start with it and is left alone; when several start with it
    (older tooling), the oldest is kept current.
    """
    body = comment_body(report, marker, page_url=page_url)
    ours = [c for c in api.list_comments(number) if (c.get("body") or "").startswith(marker)]
    if not ours:
        return "created", int(api.create_comment(number, body)["id"])
    oldest = min(ours, key=lambda c: c["id"])
    if oldest.get("body") == body:
        return "unchanged", int(oldest["id"])
    api.update_comment(int(oldest["id"]), body)
    return "updated", int(oldest["id"])


Send = Callable[[urllib.request.Request], bytes]
# GitHub's rules: an owner is 1-39 letters, digits and inner hyphens; a repository name 1-100 of
# letters, digits, '.', '-', '_' (not '.' or '..')
OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would repeat the request, Authorization header included, wherever a 3xx points (even plain
    http on another host): answer every redirect as the error it is instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"{msg}, redirect to {newurl} refused (the token is "
                                     "never sent on)", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirect)


def _urlopen(request: urllib.request.Request) -> bytes:
    with _OPENER.open(request, timeout=30) as response:  # https only: GitHubAPI checks the URL
        return response.read()


def _repository_path(repository: str) -> str:
    """``/repos/OWNER/NAME``, each part checked against GitHub's rules and quoted."""
    owner, _, name = repository.partition("/")
    if not (OWNER.fullmatch(owner) and NAME.fullmatch(name) and name not in (".", "..")):
        raise InputError(f"expected OWNER/NAME as GitHub spells them (letters, digits, '-'; the name also "
                         f"'.' and '_'), got {repository!r}", field="--repository")
    return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"


class GitHubAPI:
    """``CommentAPI`` over GitHub's REST API; ``send`` performs one request (swapped out in tests)."""

    def __init__(self, repository: str, token: str, api_url: str = "https://api.github.com",
                 send: Send | None = None):
        self.base_path = _repository_path(repository)
        if not token:
            raise InputError("no GitHub token (set GITHUB_TOKEN)", field="GITHUB_TOKEN")
        if not api_url.startswith("https://"):
            raise InputError(f"the API URL must be https, got {api_url!r}", field="--api-url")
        self.repository, self.token, self.api_url = repository, token, api_url.rstrip("/")
        self.send = send or _urlopen

    def _call(self, method: str, path: str, payload: dict | None = None):
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method, headers={
            "Accept": "application/vnd.github+json", "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json",
            "User-Agent": "retrieval-lab"})
        try:
            raw = self.send(request)
        except urllib.error.HTTPError as exc:
            raise InputError(f"GitHub API {method} {path}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise InputError(f"GitHub API {method} {path}: {exc.reason}") from None
        except (TimeoutError, OSError) as exc:  # a connection reset or a timeout while reading the answer
            raise InputError(f"GitHub API {method} {path}: {exc}") from None
        try:
            return json_loads(raw, f"GitHub API {method} {path}") if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a proxy's HTML page, a truncated answer
            raise InputError(f"GitHub API {method} {path}: the answer is not JSON ({exc})") from None

    def _answer(self, method: str, path: str, payload: dict | None, kind: type):
        out = self._call(method, path, payload)
        if not isinstance(out, kind) or (kind is dict and not isinstance(out.get("id"), int)):
            raise InputError(f"GitHub API {method} {path}: expected a JSON {kind.__name__}"
                             f"{' with an id' if kind is dict else ''}, got {type(out).__name__}")
        return out

    def list_comments(self, number: int) -> list[dict]:
        """Every comment, page by page: at most MAX_PAGES pages (an API that always answers a full page
        would otherwise be asked forever), each a list of objects."""
        comments = []
        for page in range(1, MAX_PAGES + 1):
            batch = self._answer("GET", f"{self.base_path}/issues/{int(number)}/comments"
                                        f"?per_page={PAGE}&page={page}", None, list)
            if not all(isinstance(c, dict) and isinstance(c.get("id"), int) for c in batch):
                raise InputError(f"GitHub API GET comments page {page}: expected comment objects with an id")
            comments += batch
            if len(batch) < PAGE:
                return comments
        raise InputError(f"pull request #{number} has more than {MAX_PAGES * PAGE} comments (or the API keeps "
                         "answering full pages): refusing to read on")

    def create_comment(self, number: int, body: str) -> dict:
        return self._answer("POST", f"{self.base_path}/issues/{int(number)}/comments", {"body": body}, dict)

    def update_comment(self, comment_id: int, body: str) -> dict:
        return self._answer("PATCH", f"{self.base_path}/issues/comments/{int(comment_id)}", {"body": body}, dict)
