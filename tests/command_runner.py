"""Run one subcommand through ``cli.main``, the console script's own path (parse, run, InputError -> 2)."""

from __future__ import annotations

from retrieval_lab import cli


def run_command(name: str, argv: list[str]) -> int:
    return cli.main([name, *argv])
