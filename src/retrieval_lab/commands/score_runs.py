"""``retrieval-lab score-runs``: trec_eval on files, any runs against any qrels (:func:`evaluation.evaluate`).

Not a pipeline stage: the ``evaluate`` stage (:mod:`retrieval_lab.evaluation`) writes
a run's metrics and reports.
"""

from __future__ import annotations

import argparse

from ..core.guard import FILE, Paths
from ..core.params_cli import add_params_args, params_of

HELP = "trec_eval-style: measure TREC run files against qrels (TREC or BEIR tsv): nDCG@10, R@100, AP, ..."
PATHS = Paths(inputs={"qrels": FILE, "runs": FILE}, words=("measures",))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="qrels: TREC 4-column or BEIR tsv")
    parser.add_argument("runs", metavar="RUN", nargs="+", help="TREC 6-column run file(s)")
    parser.add_argument("-m", "--measure", dest="measures", action="append",
                        metavar="MEASURE", help="e.g. nDCG@10, R(rel=2)@5, AP, nDCG(gain=exp)@10 (repeatable; "
                        "default: the params' evaluate.measures); Judged@k, the share of the top k the qrels "
                        "judge, is added at the largest cutoff when none is given")
    parser.add_argument("--per-query", action="store_true", help="also show every query's values")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--judged-only", action="store_true",
                        help="condensed lists: drop unjudged documents before measuring (trec_eval -J)")
    add_params_args(parser)


def _run_names(paths: list[str]) -> list[str]:
    from pathlib import Path

    names = [Path(p).name for p in paths]
    # two runs with one file name in different folders: fall back to the paths as given
    return [n if names.count(n) == 1 else p for n, p in zip(names, paths)]


def _check_distinct(paths: list[str]) -> None:
    from pathlib import Path

    from ..core.errors import InputError

    seen: dict[Path, str] = {}
    for path in paths:
        key = Path(path).resolve()
        if key in seen:
            raise InputError(f"run given twice (also as {seen[key]}): each run is measured once", path)
        seen[key] = path


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header] + rows]
    return "\n".join(lines[:1] + ["  ".join("-" * w for w in widths)] + lines[1:])


def run(args: argparse.Namespace) -> int:
    import json

    from ..core.data import read_qrels
    from ..evaluation import check_overlap, evaluate, judged_measures
    from ..metrics import parse_measure
    from ..runs import read_run

    params = params_of(args)  # read (and checked) even when -m names the measures
    measures = list(dict.fromkeys(args.measures or params.evaluate.measures))
    cutoffs = [parse_measure(m).cutoff for m in measures]  # checks every name before reading files
    judged_k = max([c for c in cutoffs if c is not None], default=10)
    shown = list(dict.fromkeys(measures + judged_measures(measures, judged_k)))
    _check_distinct(args.runs)
    qrels = read_qrels(args.qrels)
    results = {}
    for name, path in zip(_run_names(args.runs), args.runs):
        run_ = read_run(path)
        check_overlap(qrels, run_, path, args.qrels)
        results[name] = evaluate(qrels, run_, shown, judged_only=args.judged_only)

    if args.json:
        print(json.dumps({name: r.to_json(per_query=args.per_query) for name, r in results.items()}, indent=2))
        return 0
    if args.judged_only:
        print("JUDGED-ONLY (condensed) evaluation: unjudged documents removed before measuring (trec_eval -J)")
    print(_table(["run"] + shown, [[name] + [f"{r.means[m]:.4f}" for m in shown] for name, r in results.items()]))
    if all(r >= 1 for judged in qrels.values() for r in judged.values()):
        judged_names = ", ".join(m for m in shown if parse_measure(m).family == "Judged")
        print(f"{judged_names}: the share of the top k the qrels judge. These qrels list only relevant "
              "documents, so it is low for every run: the others are unjudged"
              + (", removed here before the other measures (-J)." if args.judged_only else " and count as misses."))
    for name, result in results.items():
        cov = result.coverage
        print(f"{name}: {cov.sentence()}")
        for measure, n in cov.queries_by_measure.items():
            print(f"{name}: {measure} averages {n} of {cov.queries_evaluated} queries "
                  f"({cov.excluded_by_measure[measure]} have no judgment >= {parse_measure(measure).rel})")
    if args.per_query:
        for name, result in results.items():
            print(f"\nper query: {name}")
            rows = [[qid] + [f"{values[m]:.4f}" if m in values else "-" for m in shown]
                    for qid, values in result.per_query.items()]
            print(_table(["query"] + shown, rows))
    return 0
