"""Thin entry points: parse arguments, load a params section, call library code, write outputs."""

from __future__ import annotations

import argparse

from ..config import Params, load_params


def add_params_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a parameter, checked against the same schema (repeatable)")


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)
