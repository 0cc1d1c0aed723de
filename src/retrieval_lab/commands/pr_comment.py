"""``retrieval-lab pr-comment``: post the report on a pull request, or update the comment already there."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, Paths

HELP = "keep one pull-request comment with the report up to date (found by a hidden marker); token in GITHUB_TOKEN"
PATHS = Paths(inputs={"--body-file": FILE}, words=("--repository", "--api-url", "--page-url"))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repository", required=True, metavar="OWNER/NAME", help="e.g. $GITHUB_REPOSITORY")
    parser.add_argument("--pr", required=True, type=int, help="pull request number")
    parser.add_argument("--body-file", required=True, help="markdown to post (retrieval-lab report's report.md)")
    parser.add_argument("--api-url", default="https://api.github.com", help="GitHub API root ($GITHUB_API_URL)")
    parser.add_argument("--page-url", metavar="URL", help="link to the comparison page, put first in the comment "
                                                          "(the uploaded artifact's URL)")


def run(args: argparse.Namespace) -> int:
    import os

    from ..core.data import require_file
    from ..core.errors import InputError
    from ..pr_comment import GitHubAPI, page_line, upsert_comment

    if args.pr <= 0:
        raise InputError(f"expected a pull request number > 0, got {args.pr}", field="--pr")
    if args.page_url:
        page_line(args.page_url)  # checked before anything is read or sent
    path = require_file(args.body_file, " (run retrieval-lab report first)")
    api = GitHubAPI(args.repository, os.environ.get("GITHUB_TOKEN", ""), args.api_url)
    action, comment_id = upsert_comment(api, args.pr, path.read_text(encoding="utf-8"), page_url=args.page_url)
    print(f"{action} comment {comment_id} on {args.repository}#{args.pr}")
    return 0
