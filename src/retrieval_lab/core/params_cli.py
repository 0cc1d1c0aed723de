"""The params options every stage command shares: ``--params`` and ``--set``."""

from __future__ import annotations

import argparse

from .params import Params
from .params_file import DEFAULT_PARAMS, load_params

DEFAULTS_HELP = (f"params file (default: ./{DEFAULT_PARAMS} when the working directory has one, else the "
                 "built-in defaults, which equal the repository's params.yaml key for key)")


def add_params_args(parser: argparse.ArgumentParser) -> None:
    """``--params`` and ``--set``, the same on every command; ``--help`` says where defaults come from."""
    parser.add_argument("--params", default=None, help=DEFAULTS_HELP)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a parameter, checked against the same schema (repeatable)")


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)
