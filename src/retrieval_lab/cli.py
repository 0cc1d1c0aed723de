"""``retrieval-lab``: one console script, one small module per subcommand in ``commands/``.

Each command module defines ``HELP``, ``PATHS`` (its inputs and outputs, :mod:`core.guard`),
``configure(parser)`` and ``run(args) -> int``
and imports heavy libraries inside ``run`` so ``--help`` stays fast; what several
commands share sits in ``commands/arguments.py``, never in another command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import textwrap

from .core.atomic import REPLACED
from .core.errors import InputError
from .core.guard import guard
from .core.memory import keep_freed_memory

# --help lists the commands in these groups, in the order a newcomer needs them: measuring runs first
# (any TREC run on any BEIR folder or qrels), then the pipeline, then the tools around it, then teaching.
PIPELINE = "pipeline stages (dvc.yaml runs these and evaluate; each also works alone)"
# group title -> {subcommand: module under retrieval_lab.commands}
GROUPS: dict[str, dict[str, str]] = {
    "measure your runs (any TREC run, any BEIR folder or qrels file)": {
        "score-runs": "score_runs",
        "compare-runs": "compare_runs",
        "page": "page",
        "evaluate": "evaluate",
        "diagnose": "diagnose",
    },
    PIPELINE: {
        "names": "names",
        "generate": "generate",
        "prepare": "prepare",
        "encode": "encode",
        "index": "index",
        "retrieve": "retrieve",
        "fuse": "fuse",
        "mine": "mine",
        "train": "train",
        "compare": "compare",
    },
    "review a change, judgments and models": {
        "report": "report",
        "latency": "latency",
        "table": "table",
        "pr-comment": "pr_comment",
        "pool": "pool",
        "judge": "judge",
        "inspect-embeddings": "inspect_embeddings",
    },
    "teaching and checking": {
        "check-loss": "check_loss",
        "mask-demo": "mask_demo",
        "check-resume": "check_resume",
    },
}
# the commands dvc.yaml runs: the pipeline group and evaluate, which is listed first as users run it first
STAGES = (*GROUPS[PIPELINE], "evaluate")
COMMANDS = {name: module for group in GROUPS.values() for name, module in group.items()}
DESCRIPTION = """Measure text retrievers and fine-tune an embedding model, reproducibly (a DVC pipeline).

Your own BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) needs no pipeline:
  retrieval-lab retrieve --retriever bm25 --dataset DIR --split test --output bm25.trec
  retrieval-lab retrieve --retriever dense --dataset DIR --split test --output dense.trec
  retrieval-lab score-runs DIR/qrels/test.tsv bm25.trec dense.trec -m nDCG@10 -m R@100
  retrieval-lab compare-runs DIR/qrels/test.tsv bm25.trec dense.trec -m nDCG@10 -m R@100
  retrieval-lab diagnose --dataset DIR --run bm25.trec
Python: import retrieval_lab as rl (docs/api.md)."""


def _listing(helps: dict[str, str], width: int) -> str:
    """``name      help`` rows wrapped like argparse's own command list (argparse indents them by 2)."""
    column = 20
    rows = []
    for name, text in helps.items():
        lines = textwrap.wrap(text, max(width - 2 - column, 20))
        first = f"{name:<{column}}" if len(name) <= column - 2 else name + "\n" + " " * column
        rows.append(first + lines[0] + "".join("\n" + " " * column + line for line in lines[1:]))
    return "\n".join(rows)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every command, or ``command``'s alone (what :func:`main` parses when its first word names
    one: the others' options cost about 15 ms a call, and the tests call :func:`main` thousands of times)."""
    parser = argparse.ArgumentParser(prog="retrieval-lab", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                help="one of the commands below; retrieval-lab COMMAND --help for its options")
    width = shutil.get_terminal_size().columns - 2  # as argparse wraps its own help
    for title, commands in GROUPS.items():
        helps = {}
        for name, module_name in commands.items():
            if command is not None and name != command:
                continue
            module = importlib.import_module(f"retrieval_lab.commands.{module_name}")
            # no help=: argparse would list every command in one block; the groups list them instead
            subparser = sub.add_parser(name, description=module.HELP)
            module.configure(subparser)
            subparser.set_defaults(_run=module.run, _paths=module.PATHS)
            helps[name] = module.HELP
        if command is None:  # the listing shows in the top-level help only
            parser.add_argument_group(title, _listing(helps, width))
    return parser


def _os_error(exc: OSError) -> str:
    """``PATH: reason`` on one line; a broken pipe without a path is standard output closed by its reader."""
    if exc.filename is None and isinstance(exc, BrokenPipeError):
        done = f"; the outputs were written first: {', '.join(REPLACED)}" if REPLACED else ""
        return f"standard output: {exc.strerror or exc} (its reader closed it){done}"
    if exc.filename is None and getattr(exc, "output_path", None):  # no errno, e.g. numpy's short write
        return f"{exc.output_path}: {str(exc) or type(exc).__name__}"
    if exc.filename is None or exc.strerror is None:
        return str(exc) or type(exc).__name__
    where = os.fsdecode(exc.filename) + ("" if exc.filename2 is None else f" -> {os.fsdecode(exc.filename2)}")
    return f"{where}: {exc.strerror}"


def _quiet_stdout() -> None:
    """Flush standard output, or point it at /dev/null when it fails, so the flush at exit cannot fail."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        return
    except (OSError, ValueError):
        pass
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no file descriptor (a captured stream)
        pass


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    REPLACED.clear()  # in one process (tests) several commands run: the message names this one's outputs
    code = 2  # an error's exit; 130 for an interrupt, as a shell reports SIGINT
    try:
        if sys.stdout is None:  # started with file descriptor 1 closed: every print would vanish, and exit 0 lie
            raise InputError("standard output is closed (file descriptor 1): what this command prints would be "
                             "lost; redirect it to a file, or to /dev/null to discard it; nothing was done")
        guard(args._paths, args)  # every output checked against every input before anything is written
        done = int(args._run(args) or 0)
        sys.stdout.flush()  # a closed pipe or full disk fails here, not at interpreter exit
        return done
    except InputError as exc:
        message = str(exc)
    except OSError as exc:  # disk full, read-only folder: the old outputs are still in place; a closed pipe
        # after the outputs were written: they are new, and the message says so
        message = _os_error(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a user's retriever raising it: every atomic output was undone
        done = f"; the outputs written before it: {', '.join(REPLACED)}" if REPLACED else "; no output was replaced"
        message, code = f"interrupted{f' ({exc})' if str(exc) else ''}{done}", 130
    _quiet_stdout()
    try:
        print(f"error: {message}", file=sys.stderr)
    except (OSError, ValueError):  # standard error closed too: the exit code is all that is left
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())
