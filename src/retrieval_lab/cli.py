"""``retrieval-lab``: one console script, one small module per subcommand in ``commands/``.

Each command module defines ``HELP``, ``configure(parser)`` and ``run(args) -> int``
and imports heavy libraries inside ``run`` so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .core.errors import InputError

# subcommand name -> module under retrieval_lab.commands
COMMANDS = {
    "encode": "encode",
    "retrieve": "retrieve",
    "fuse": "fuse",
    "generate": "generate",
    "prepare": "prepare",
    "check-loss": "check_loss",
    "exercise": "exercise",
    "mine": "mine",
    "train": "train",
    "compare-resume": "compare_resume",
    "eval": "eval",
    "evaluate": "evaluate",
    "compare": "compare",
    "compare-runs": "compare_runs",
    "pool": "pool",
    "report": "report",
    "pr-comment": "pr_comment",
    "inspect-embeddings": "inspect_embeddings",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="retrieval-lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"retrieval_lab.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
