"""``retrieval-lab mine``: negatives for training from a run, audited (stage ``mine``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ..core.params_cli import add_params_args, params_of

if TYPE_CHECKING:
    from ..mining import Audit
from ..core.guard import FILE, FOLDER, Paths

HELP = "mine training negatives from a run (hard | random) and audit them; or audit an existing file"
PATHS = Paths(inputs={"--dataset": FOLDER, "--run": FILE, "--audit": FILE}, outputs={"--output": FOLDER},
              words=("--strategy",))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="prepared dataset folder (data/prepared/<ds>)")
    parser.add_argument("--run", help="TREC run whose ranking is mined (runs/<ds>/dense.trec)")
    parser.add_argument("--strategy", help="hard | random")
    parser.add_argument("--output", help="output folder: negatives.jsonl + mining-audit.json")
    parser.add_argument("--audit", metavar="FILE", help="only audit this negatives.jsonl (exit 1 if it fails)")
    add_params_args(parser)


def _summary(audit: Audit) -> str:
    full = audit.to_json()
    out = {k: full[k] for k in ("passed", "strategy", "queries", "negatives", "checks")}
    out["shortfall_queries"] = full["shortfall"]["queries"]
    out["suspicious"] = full["suspicious"]["count"]
    out["pool"] = full["pool"]
    if audit.margin_dropped is not None and audit.margin_dropped["margin"] is not None:
        out["margin_dropped"] = {k: audit.margin_dropped[k] for k in ("margin", "dropped", "queries")}
    return json.dumps(out)


def _print_failures(audit: Audit) -> None:
    for f in audit.failures[:20]:
        where = f"line {f.line}: " if f.line else ""
        print(f"  {where}query {f.query_id!r} document {f.doc_id!r}: {f.problem}", file=sys.stderr)
    if len(audit.failures) > 20:
        print(f"  ... {len(audit.failures) - 20} more", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..core.data import empty_documents_note, load_dataset
    from ..core.errors import InputError
    from ..mining import NOTHING_AUDITED, MiningAuditError, audit_negatives, check_strategy, mine_to_dir
    from ..runs import read_run

    extra = [name for name in ("run", "strategy", "output") if getattr(args, name) is not None]
    if args.audit and extra:  # an audit writes nothing and mines nothing: these would be silently ignored
        raise InputError(f"--audit only checks a file; it takes no --{', --'.join(extra)}", field="--audit")
    params = params_of(args).mine
    dataset = load_dataset(args.dataset)
    note = empty_documents_note(dataset.corpus, consequence="left out of the mining pool")
    if note:
        print(f"mine: {note}", file=sys.stderr if args.audit else sys.stdout)
    if args.audit:
        audit = audit_negatives(args.audit, dataset, params.count)
        print(_summary(audit))
        if not audit.passed:
            print(f"audit FAILED for {args.audit}:" + ("" if audit.queries else f" {NOTHING_AUDITED}"),
                  file=sys.stderr)
            _print_failures(audit)
            return 1
        return 0
    missing = [name for name in ("run", "strategy", "output") if getattr(args, name) is None]
    if missing:
        print(f"error: --{', --'.join(missing)} required (or --audit FILE)", file=sys.stderr)
        return 2
    check_strategy(args.strategy)
    try:
        audit = mine_to_dir(read_run(args.run), dataset, params, args.strategy, args.output, args.run)
    except MiningAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _print_failures(exc.audit)
        return 1
    print(_summary(audit))
    return 0
