from __future__ import annotations

import argparse

from ..core.guard import FILE, Paths
from ..core.kinds import DVC_YAML
from ..core.params_cli import add_params_args, params_of

HELP = ("write dvc.yaml's names (dataset, models, variants, fusion methods, your retrievers) from checked "
        "params.yaml; --check: fail while they differ (the names stage)")
PATHS = Paths(outputs={"--dvc-yaml": FILE}, kinds={"--dvc-yaml": DVC_YAML})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dvc-yaml", default="dvc.yaml",
                        help="the pipeline file whose names block is written (default: dvc.yaml)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 2 naming what params.yaml says that the block does not")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from .. import pipeline_names
    from ..core.atomic import atomic_path
    from ..core.errors import InputError
    from ..core.params_file import DEFAULT_PARAMS, _located

    params = params_of(args)  # a bad name is refused here, naming params.yaml's line
    try:
        want = pipeline_names.names_of(params)  # and what dvc.yaml cannot take safely, here
    except InputError as exc:
        raise _located(InputError(exc.reason, args.params or DEFAULT_PARAMS, field=exc.field),
                       Path(args.params or DEFAULT_PARAMS), args.overrides) from None
    path = Path(args.dvc_yaml)
    try:
        text = path.read_bytes().decode("utf-8")  # bytes: CRLF line endings kept as they are
    except FileNotFoundError:
        raise InputError("not found", args.dvc_yaml) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", args.dvc_yaml) from None
    have = pipeline_names.declared(text, args.dvc_yaml)
    found = pipeline_names.differences(have, want)
    if not found and pipeline_names.fill(text, want, args.dvc_yaml) != text:
        found.append("the compare stage's generated inputs are not the files of the runs compare.pairs names")
    if args.check:
        if found:
            raise InputError(f"its names differ from params.yaml ({'; '.join(found)}): run `retrieval-lab names` "
                             "to write them, then dvc repro", args.dvc_yaml)
        print(f"{args.dvc_yaml}: its names are params.yaml's")
        return 0
    filled = pipeline_names.fill(text, want, args.dvc_yaml)
    if filled == text:
        print(f"{args.dvc_yaml}: its names are params.yaml's already")
        return 0
    # a dvc.yaml that is a link stays one: the file it points to is written (atomically, in its own folder)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    with atomic_path(target, kind=DVC_YAML) as tmp:
        tmp.write_bytes(filled.encode("utf-8"))
    print(f"{args.dvc_yaml}: names written ({'; '.join(found) or 'the block rewritten'})")
    return 0
