"""Run one subcommand the way cli.main does (parse, run, InputError -> exit 2), importing only its module."""

from __future__ import annotations

import argparse
import importlib

from retrieval_lab.core.errors import InputError


def run_command(name: str, argv: list[str]) -> int:
    module = importlib.import_module(f"retrieval_lab.commands.{name}")
    parser = argparse.ArgumentParser(prog=name)
    module.configure(parser)
    try:
        return int(module.run(parser.parse_args(argv)) or 0)
    except InputError as exc:
        print(f"error: {exc}")
        return 2
