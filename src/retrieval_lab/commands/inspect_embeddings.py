"""``retrieval-lab inspect-embeddings``: texts, vectors and nearest documents, for one model or two."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, Paths
from ..core.params import base_model
from ..core.params_cli import add_params_args, params_of

HELP = ("show N queries' and N documents' texts, embedding dimension and norm, and nearest documents "
        "by cosine; with --compare-model, base vs fine-tuned neighbours side by side")
PATHS = Paths(inputs={"--dataset": FOLDER, "--model": FILE, "--compare-model": FILE}, words=("--split",))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="BEIR folder")
    parser.add_argument("--model", help="lock file (hashes verified) or model folder (default: the model train.base names under dense.models)")
    parser.add_argument("--compare-model", metavar="PATH",
                        help="a second model (e.g. fine-tuned folder): per query, neighbours under both")
    parser.add_argument("--n", type=int, default=3, help="first N queries of the split and first N documents "
                        "(default: 3)")
    parser.add_argument("--split", default="test", help="qrels split the queries come from (default: test)")
    parser.add_argument("--k", type=int, default=5, help="nearest documents shown (default: 5)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from ..core.data import load_dataset
    from ..encoder import load
    from ..inspection import compare_models, format_comparison, format_report, inspect, pick

    params = params_of(args)
    dataset = load_dataset(args.dataset, [args.split])
    pick(dataset, args.split, args.n, args.k)  # bad --n / --k / --split fail before a model is loaded
    fields = list(params.retrieve.fields)

    def report_for(model: str) -> dict:
        encoder = load(model, params.dense.device)
        return inspect(encoder, dataset, args.split, args.n, args.k, params.dense, fields)

    base = report_for(args.model or base_model(params)[0])
    if args.compare_model is None:
        print(json.dumps(base, indent=2, ensure_ascii=False) if args.json else format_report(base))
        return 0
    tuned = report_for(args.compare_model)
    if args.json:
        print(json.dumps({"base": base, "tuned": tuned, "comparison": compare_models(base, tuned)}, indent=2,
                         ensure_ascii=False))
    else:
        print(format_comparison(base, tuned))
    return 0
