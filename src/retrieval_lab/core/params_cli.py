"""The params options every stage command shares: ``--params`` and ``--set``; and ``--shards``, ``--scheduler``."""

from __future__ import annotations

import argparse

from .errors import InputError
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


# retrievers whose params section has shards and scheduler (a sharded run on Dask: core/cluster.py)
SHARDED = ("bm25", "dense")


def add_shard_args(parser) -> None:
    """``--shards`` and ``--scheduler``: the params ``<retriever>.shards`` and ``<retriever>.scheduler`` given
    on the command line (bm25 and dense)."""
    parser.add_argument("--shards", type=int, metavar="S", help="contiguous shards, each a task of a Dask cluster "
                        "(bm25.shards or dense.shards; default: params). 1: everything in this process")
    parser.add_argument("--scheduler", metavar="ADDRESS", help="with --shards > 1: the Dask scheduler "
                        "(tcp://HOST:8786; bm25.scheduler or dense.scheduler); default: params, whose null starts a "
                        "LocalCluster on this machine")


def shard_overrides(args, section: str) -> list[str]:
    """``--shards`` and ``--scheduler`` as the ``--set`` overrides of ``section``; refused beside a ``--set`` of
    the same key (two values for one setting: neither may win silently) and for a retriever without shards."""
    given = [(flag, key, value) for flag, key, value in (("--shards", "shards", args.shards),
                                                        ("--scheduler", "scheduler", args.scheduler))
             if value is not None]
    if given and section not in SHARDED:
        raise InputError(f"{section} runs in one process: {given[0][0]} is for {' and '.join(SHARDED)}",
                         field=given[0][0])
    out = []
    for flag, key, value in given:
        both = [t for t in args.overrides if t.split("=", 1)[0].strip() in (section, f"{section}.{key}")]
        if both:
            raise InputError(f"{flag} {value} and --set {both[0]} both set {section}.{key}: give one", field=flag)
        out.append(f"{section}.{key}={value}")
    return out
