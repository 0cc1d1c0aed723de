"""``retrieval-lab``: one console script, one small module per subcommand in ``commands/``.

Each command module defines ``HELP``, ``configure(parser)`` and ``run(args) -> int``
and imports heavy libraries inside ``run`` so ``--help`` stays fast; what several
commands share sits in ``commands/arguments.py``, never in another command.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import os
import shutil
import sys
import textwrap

from .core.errors import InputError

# --help lists the commands in these groups: what dvc.yaml runs apart from the tools around it.
# group title -> {subcommand: module under retrieval_lab.commands}
GROUPS: dict[str, dict[str, str]] = {
    "pipeline stages (dvc.yaml runs these)": {
        "generate": "generate",
        "prepare": "prepare",
        "encode": "encode",
        "index": "index",
        "retrieve": "retrieve",
        "fuse": "fuse",
        "mine": "mine",
        "train": "train",
        "evaluate": "evaluate",
        "compare": "compare",
    },
    "tools for runs, judgments and models": {
        "score-runs": "score_runs",
        "compare-runs": "compare_runs",
        "pool": "pool",
        "report": "report",
        "table": "table",
        "pr-comment": "pr_comment",
        "inspect-embeddings": "inspect_embeddings",
    },
    "teaching and checking": {
        "check-loss": "check_loss",
        "mask-demo": "mask_demo",
        "check-resume": "check_resume",
    },
}
COMMANDS = {name: module for group in GROUPS.values() for name, module in group.items()}
# glibc's mallopt parameters (malloc.h) and the values keep_freed_memory gives them, in bytes
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_BLOCKS_UP_TO = 256 << 20  # a batch's activations (attention scores at 64 x 256 tokens: 200 MB)
_KEEP_FREE_AT_HEAP_TOP = 2**31 - 1  # the most mallopt takes (a C int)
DESCRIPTION = "Measure text retrievers and fine-tune an embedding model, reproducibly (a DVC pipeline)."


def _listing(helps: dict[str, str], width: int) -> str:
    """``name      help`` rows wrapped like argparse's own command list (argparse indents them by 2)."""
    column = 20
    rows = []
    for name, text in helps.items():
        lines = textwrap.wrap(text, max(width - 2 - column, 20))
        first = f"{name:<{column}}" if len(name) <= column - 2 else name + "\n" + " " * column
        rows.append(first + lines[0] + "".join("\n" + " " * column + line for line in lines[1:]))
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="retrieval-lab", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                help="one of the commands below; retrieval-lab COMMAND --help for its options")
    width = shutil.get_terminal_size().columns - 2  # as argparse wraps its own help
    for title, commands in GROUPS.items():
        helps = {}
        for name, module_name in commands.items():
            module = importlib.import_module(f"retrieval_lab.commands.{module_name}")
            # no help=: argparse would list every command in one block; the groups list them instead
            command = sub.add_parser(name, description=module.HELP)
            module.configure(command)
            command.set_defaults(_run=module.run)
            helps[name] = module.HELP
        parser.add_argument_group(title, _listing(helps, width))
    return parser


def _os_error(exc: OSError) -> str:
    """``PATH: reason`` on one line; a broken pipe without a path is standard output closed by its reader."""
    if exc.filename is None and isinstance(exc, BrokenPipeError):
        return f"standard output: {exc.strerror or exc} (its reader closed it)"
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


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next allocation instead of returning it to the kernel.

    By default glibc maps each block over a threshold (128 KiB, rising to at most 32 MiB) on its own and
    unmaps it when freed, and trims the heap once 128 KiB at its top are free. A model's activations are
    allocated and freed batch after batch, so every batch's memory came back as new pages the kernel had
    to fault in and zero: encoding SciFact's 5,183 abstracts took 9.5 million page faults and 16 s of
    system time beside 152 s of user time; with blocks up to 256 MiB served from the heap and the heap
    never trimmed, 0.2 million and 2 s (the same with every block on the heap). Only where freed memory
    goes changes, never the arithmetic (the embeddings' bytes are the same). Larger blocks (a big
    corpus's embedding matrix, allocated once) are still mapped on their own and returned when freed;
    the heap keeps its peak until the process exits, which a command does when its work is done. Other
    C libraries are left as they are. True when glibc took both settings.
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError):  # no confstr, or not a GNU C library
        return False
    libc = ctypes.CDLL(None)  # the C library this process already runs on
    return (libc.mallopt(_M_MMAP_THRESHOLD, _HEAP_BLOCKS_UP_TO) == 1
            and libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_FREE_AT_HEAP_TOP) == 1)


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()
    args = build_parser().parse_args(argv)
    try:
        code = int(args._run(args) or 0)
        if sys.stdout is not None:  # None: started with file descriptor 1 closed, print writes nothing
            sys.stdout.flush()  # a closed pipe or full disk fails here, not at interpreter exit
        return code
    except InputError as exc:
        message = str(exc)
    except OSError as exc:  # disk full, read-only folder, closed pipe: the old outputs are still in place
        message = _os_error(exc)
    _quiet_stdout()
    try:
        print(f"error: {message}", file=sys.stderr)
    except (OSError, ValueError):  # standard error closed too: the exit code is all that is left
        pass
    return 2


if __name__ == "__main__":
    sys.exit(main())
