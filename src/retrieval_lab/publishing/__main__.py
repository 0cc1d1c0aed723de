"""``python -m retrieval_lab.publishing [--check]``: every generated block of README.md and docs/, and the
parameters page. docs/benchmarks.md (``scripts/bench_report.py --skip-run`` with the arguments in its head)
and the worked example's files (``python -m retrieval_lab.publishing.experiments``) have their own commands:
they rerun benchmarks or read experiments."""

from __future__ import annotations

import argparse
import sys

from retrieval_lab.core.atomic import write_text
from retrieval_lab.core.errors import InputError
from retrieval_lab.publishing import REPO, blocks, params_reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval_lab.publishing", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale block")
    args = parser.parse_args(argv)
    try:
        used = blocks.used_blocks(REPO)
        rendered = blocks.render_all(REPO, sorted({n for names in used.values() for n in names}))
        stale = []
        for path, names in used.items():
            if not names:
                continue
            text = path.read_text(encoding="utf-8")
            filled, changed = blocks.fill(text, rendered, str(path))
            stale += [f"{path.relative_to(REPO)}: generated:{name}" for name in changed]
            if changed and not args.check:
                write_text(path, filled)
        page = REPO / params_reference.PAGE
        reference = params_reference.render(REPO)
        if not page.exists() or page.read_text(encoding="utf-8") != reference:
            stale.append(f"{params_reference.PAGE}: the parameters reference")
            if not args.check:
                write_text(page, reference)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for item in stale:
        print(f"{item} {'differs from what the committed files give' if args.check else 'rewritten'}",
              file=sys.stderr if args.check else sys.stdout)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
