"""Run one subcommand through ``cli.main``, the console script's own path (parse, run, InputError -> 2)."""

from __future__ import annotations

import argparse

from retrieval_lab import cli


def run_command(name: str, argv: list[str]) -> int:
    return cli.main([name, *argv])


def subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """command name -> its parser, as ``parser`` (a :func:`cli.build_parser`) holds them."""
    return dict(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)
