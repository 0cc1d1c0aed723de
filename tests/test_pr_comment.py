"""One comment per pull request, kept current: against a fake GitHub that answers in memory (no network)."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from command_runner import run_command

from retrieval_lab.core.errors import InputError
from retrieval_lab.pr_comment import MARKER, GitHubAPI, comment_body, upsert_comment

REPO = "team/retrieval"


class FakeGitHub:
    """The three issue-comment endpoints of GitHub's REST API, as ``GitHubAPI.send``."""

    def __init__(self, comments: list[str] = (), number: int = 7):
        self.number = number
        self.comments = [{"id": 1000 + i, "body": body, "user": {"login": "someone"}} for i, body in enumerate(comments)]
        self.requests: list[tuple[str, str, dict | None]] = []

    def __call__(self, request: urllib.request.Request) -> bytes:
        assert request.full_url.startswith("https://api.github.com/repos/team/retrieval/")
        assert request.get_header("Authorization") == "Bearer t0ken"
        method, path = request.get_method(), request.full_url.removeprefix("https://api.github.com")
        payload = json.loads(request.data) if request.data else None
        self.requests.append((method, path, payload))
        if m := re.fullmatch(rf"/repos/{REPO}/issues/(\d+)/comments\?per_page=(\d+)&page=(\d+)", path):
            if int(m[1]) != self.number:
                return b"[]"
            size, page = int(m[2]), int(m[3])
            return json.dumps(self.comments[(page - 1) * size: page * size]).encode()
        if method == "POST" and path == f"/repos/{REPO}/issues/{self.number}/comments":
            comment = {"id": 5000 + len(self.comments), "body": payload["body"], "user": {"login": "bot"}}
            self.comments.append(comment)
            return json.dumps(comment).encode()
        if method == "PATCH" and (m := re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", path)):
            comment = next((c for c in self.comments if c["id"] == int(m[1])), None)
            if comment is None:
                raise urllib.error.HTTPError(request.full_url, 404, "Not Found", None, None)
            comment["body"] = payload["body"]
            return json.dumps(comment).encode()
        raise AssertionError(f"unexpected request {method} {path}")


def api(fake: FakeGitHub) -> GitHubAPI:
    return GitHubAPI(REPO, "t0ken", send=fake)


def ours(fake: FakeGitHub) -> list[dict]:
    return [c for c in fake.comments if c["body"].startswith(MARKER)]


def test_first_push_posts_one_comment_and_later_pushes_edit_it():
    fake = FakeGitHub(["LGTM", "please add a test"])
    assert upsert_comment(api(fake), 7, "report 1") == ("created", 5002)
    assert fake.requests[-1] == ("POST", f"/repos/{REPO}/issues/7/comments", {"body": f"{MARKER}\nreport 1"})
    assert upsert_comment(api(fake), 7, "report 2") == ("updated", 5002)
    assert fake.requests[-1] == ("PATCH", f"/repos/{REPO}/issues/comments/5002", {"body": f"{MARKER}\nreport 2"})
    assert upsert_comment(api(fake), 7, "report 2") == ("unchanged", 5002)
    assert fake.requests[-1][0] == "GET"  # nothing written when nothing changed
    assert [c["body"] for c in ours(fake)] == [f"{MARKER}\nreport 2"]
    assert [c["body"] for c in fake.comments[:2]] == ["LGTM", "please add a test"]  # others untouched


def test_our_comment_is_found_past_the_first_page():
    # 230 comments: pages of 100, 100, 30; ours is number 150, on page 2
    bodies = [f"comment {i}" for i in range(230)]
    bodies[150] = f"{MARKER}\nold report"
    fake = FakeGitHub(bodies)
    assert upsert_comment(api(fake), 7, "new report") == ("updated", 1150)
    pages = [p for m, p, _ in fake.requests if m == "GET"]
    assert pages == [f"/repos/{REPO}/issues/7/comments?per_page=100&page={n}" for n in (1, 2, 3)]
    assert len(fake.comments) == 230 and fake.comments[150]["body"] == f"{MARKER}\nnew report"


def test_a_reply_quoting_the_marker_is_not_ours():
    fake = FakeGitHub([f"> {MARKER}\n> old report\n\nwhy did nDCG drop?"])
    assert upsert_comment(api(fake), 7, "report")[0] == "created"
    assert fake.comments[0]["body"].startswith("> ")  # the reply is left as written
    assert len(ours(fake)) == 1


def test_of_several_marked_comments_the_oldest_is_kept_current():
    fake = FakeGitHub(["x", f"{MARKER}\nfirst", f"{MARKER}\nsecond"])
    assert upsert_comment(api(fake), 7, "third") == ("updated", 1001)
    assert [c["body"] for c in fake.comments] == ["x", f"{MARKER}\nthird", f"{MARKER}\nsecond"]


def test_a_long_report_is_cut_to_the_comment_limit():
    body = comment_body("x" * 70_000)
    assert len(body) == 65536 and body.startswith(MARKER) and body.endswith("in the job's artifacts)\n")
    assert comment_body("short") == f"{MARKER}\nshort"


def test_http_errors_and_bad_settings_are_clear():
    class Gone(FakeGitHub):
        def __call__(self, request):
            if request.get_method() == "PATCH":
                raise urllib.error.HTTPError(request.full_url, 404, "Not Found", None, None)
            return super().__call__(request)

    gone = Gone([f"{MARKER}\nold"])
    with pytest.raises(InputError, match=r"PATCH /repos/team/retrieval/issues/comments/1000: HTTP 404 Not Found"):
        upsert_comment(api(gone), 7, "new")
    with pytest.raises(InputError, match="GITHUB_TOKEN"):
        GitHubAPI(REPO, "")
    with pytest.raises(InputError, match="OWNER/NAME"):
        GitHubAPI("retrieval", "t0ken")
    with pytest.raises(InputError, match="https"):
        GitHubAPI(REPO, "t0ken", api_url="http://example.invalid")


@contextmanager
def _loopback_server(answer):
    """An HTTP server on 127.0.0.1 (loopback only) that records every request's headers; ``answer(handler)``."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(dict(self.headers))
            answer(self)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _reply(code: int, headers: dict, body: bytes = b""):
    def answer(handler):
        handler.send_response(code)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(body)
    return answer


def test_the_token_is_never_sent_on_a_redirect():
    # the API answers 302 to another host over plain http; urllib would repeat the request there,
    # Authorization header included. Both servers are loopback: the "API" is reached over http only
    # because the test sets api_url past the https check (the redirect handling is what is tested).
    with _loopback_server(_reply(200, {"Content-Type": "application/json"}, b"[]")) as (elsewhere, stolen), \
            _loopback_server(_reply(302, {"Location": f"{elsewhere}/collect"})) as (api_root, asked):
        github = GitHubAPI(REPO, "t0ken")
        github.api_url = api_root
        with pytest.raises(InputError, match=r"GET /repos/team/retrieval/issues/7/comments\?per_page=100&page=1: "
                                             r"HTTP 302 .*redirect to http://127\.0\.0\.1:\d+/collect refused"):
            github.list_comments(7)
    assert len(asked) == 1 and asked[0]["Authorization"] == "Bearer t0ken"  # the API itself got it
    assert stolen == []  # the redirect target was never contacted, so never saw the token


@pytest.mark.parametrize("repository", [
    "a/b?x=", "team/retrieval#1", "team/../other", "team/..", "team/.", "-team/x", "team-/x", "te am/x",
    "team/retrieval/extra", "team/", "/retrieval", "team/re%2Fx", "t" * 40 + "/x", "team/" + "r" * 101,
])
def test_a_repository_that_is_not_owner_slash_name_is_refused(repository):
    with pytest.raises(InputError, match="field '--repository': expected OWNER/NAME"):
        GitHubAPI(repository, "t0ken")


def test_repository_names_github_allows_are_accepted_and_quoted():
    requests = []
    github = GitHubAPI("My-Org9/repo.name_x-1", "t0ken", send=lambda r: requests.append(r.full_url) or b"[]")
    assert github.list_comments(3) == []
    assert requests == ["https://api.github.com/repos/My-Org9/repo.name_x-1/issues/3/comments?per_page=100&page=1"]


def test_command_reads_the_token_from_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    (tmp_path / "report.md").write_text("**No change**\n")
    argv = ["--repository", REPO, "--pr", "7", "--body-file", str(tmp_path / "report.md")]
    assert run_command("pr-comment", argv) == 2
    assert "GITHUB_TOKEN" in capsys.readouterr().err
    assert run_command("pr-comment", argv[:-1] + [str(tmp_path / "missing.md")]) == 2
    assert "missing.md: file not found" in capsys.readouterr().err
    fake = FakeGitHub(["hello"])
    monkeypatch.setattr("retrieval_lab.pr_comment._urlopen", fake)
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    assert run_command("pr-comment", argv) == 0
    assert run_command("pr-comment", argv) == 0
    assert capsys.readouterr().out.splitlines() == [f"created comment 5001 on {REPO}#7",
                                                    f"unchanged comment 5001 on {REPO}#7"]
    assert [c["body"] for c in fake.comments] == ["hello", f"{MARKER}\n**No change**\n"]


def test_the_pull_request_workflow_gates_and_keeps_one_comment():
    from beir_fixtures import REPO as ROOT

    workflow = (ROOT / ".github" / "workflows" / "pr-report.yml").read_text()
    assert '.gate-venv/bin/retrieval-lab report --base "origin/$BASE_REF"' in workflow
    assert "--fail-on-regression" in workflow and "retrieval-lab pr-comment" in workflow
    assert "gh pr comment" not in workflow  # that posted a new comment on every push
    assert "pull-requests: write" in workflow


def _steps() -> list[dict]:
    import yaml
    from beir_fixtures import REPO as ROOT

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pr-report.yml").read_text())
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_workflow_splices_no_expression_into_a_shell_line_and_pins_actions_by_sha():
    steps = _steps()
    for step in steps:
        # GitHub pastes ${{ }} into the script text before bash parses it: a branch name would run
        assert "${{" not in step.get("run", ""), step
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]  # a tag can move
    assert sum("uses" in s for s in steps) == 4 and sum("run" in s for s in steps) >= 6


def test_the_gate_runs_the_base_branch_code_and_secrets_reach_only_their_steps():
    steps = _steps()
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert all(s["with"]["persist-credentials"] is False for s in checkouts)  # no token left in .git/config
    assert checkouts[1]["with"] == {"ref": "${{ github.base_ref }}", "path": ".base", "persist-credentials": False}
    runs = [s["run"] for s in steps if "run" in s]
    first_pr_code = next(i for i, r in enumerate(runs) if "pip install -q -e" in r)  # the pull request's install
    assert runs.index(next(r for r in runs if "pip install -q ./.base" in r)) < first_pr_code
    gate = next(s for s in steps if s.get("id") == "report")
    assert gate["run"].splitlines()[1].startswith(".gate-venv/bin/retrieval-lab report")
    assert "--params .base/params.yaml" in gate["run"]
    secret = {s.get("name"): s["env"] for s in steps if any("secrets." in v or "github.token" in v
                                                               for v in s.get("env", {}).values())}
    assert list(secret) == ["Pull cached results of both revisions (base first; the head's then replace them)",
                            "Share the results", "Keep the report comment up to date (one per pull request)"]
    credentialed = [s["run"] for s in steps if s.get("name") in secret]
    assert all(".gate-venv/bin/" in r and ". .venv/bin/activate" not in r for r in credentialed)
    repro = next(s for s in steps if "dvc repro" in s.get("run", ""))
    assert "env" not in repro  # pull-request code runs without credentials


def test_command_refuses_a_pull_request_number_below_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    (tmp_path / "report.md").write_text("x\n")
    assert run_command("pr-comment", ["--repository", REPO, "--pr", "0", "--body-file",
                                      str(tmp_path / "report.md")]) == 2
    assert "field '--pr': expected a pull request number > 0, got 0" in capsys.readouterr().err


def test_the_comment_links_the_comparison_page_first_and_keeps_it_when_cut():
    url = "https://github.com/o/r/actions/runs/12/artifacts/34"
    body = comment_body("x" * 70_000, page_url=url)
    assert body.startswith(f"{MARKER}\n**[Per-query comparison page]({url})**: report.html in the job's")
    assert len(body) <= 65536
    for bad in ("http://example.com/a", "https://a.b/x) [evil](https://c.d", "https://a.b/<script>", "javascript:x"):
        with pytest.raises(InputError, match="--page-url"):
            comment_body("r", page_url=bad)


def test_command_posts_the_page_link(tmp_path, monkeypatch, capsys):
    (tmp_path / "report.md").write_text("**No change**\n")
    fake = FakeGitHub([])
    monkeypatch.setattr("retrieval_lab.pr_comment._urlopen", fake)
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    argv = ["--repository", REPO, "--pr", "7", "--body-file", str(tmp_path / "report.md"), "--page-url", url]
    assert run_command("pr-comment", argv) == 0
    assert fake.comments[-1]["body"] == f"{MARKER}\n**[Per-query comparison page]({url})**: report.html in the " \
        "job's `pr-report` artifact (download, unzip, open in a browser: it loads nothing from anywhere).\n\n" \
        "**No change**\n"
    assert run_command("pr-comment", argv[:-1] + ["http://insecure"]) == 2
    assert "--page-url" in capsys.readouterr().err


def test_the_workflow_uploads_the_pages_before_the_comment_links_them():
    steps = _steps()
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact@"))
    comment = next(i for i, s in enumerate(steps) if "pr-comment" in s.get("run", ""))
    assert upload < comment and steps[upload]["id"] == "upload"
    assert "pr-report/" in steps[upload]["with"]["path"] and "compare.html" in steps[upload]["with"]["path"]
    assert steps[comment]["env"]["PAGE_URL"] == "${{ steps.upload.outputs.artifact-url }}"
    assert '--page-url "$PAGE_URL"' in steps[comment]["run"]


@pytest.mark.parametrize("answer", [b"<html>502 Bad Gateway</html>", b'{"message": "not a list"}', b"[1, 2]",
                                    b"\xff\xfe"])
def test_an_answer_that_is_not_the_apis_is_a_one_line_error(answer, tmp_path, monkeypatch, capsys):
    # issue 42: a non-JSON answer ended in a traceback
    (tmp_path / "report.md").write_text("**No change**\n")
    monkeypatch.setattr("retrieval_lab.pr_comment._urlopen", lambda request: answer)
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    code = run_command("pr-comment", ["--repository", REPO, "--pr", "7", "--body-file", str(tmp_path / "report.md")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "GitHub API GET" in err and "Traceback" not in err


def test_pagination_is_bounded(monkeypatch):
    # issue 42: an API that always returns a full page was asked 5,954 times in 15 s, forever
    from retrieval_lab import pr_comment

    calls = []

    def always_full(request):
        calls.append(request.full_url)
        return json.dumps([{"id": len(calls) * 1000 + i, "body": "x"} for i in range(pr_comment.PAGE)]).encode()

    with pytest.raises(InputError, match="more than 10000 comments"):
        GitHubAPI(REPO, "t0ken", send=always_full).list_comments(7)
    assert len(calls) == pr_comment.MAX_PAGES == 100
