from __future__ import annotations

import argparse

from ..core.guard import FOLDER, Paths
from ..core.params_cli import add_params_args, params_of

HELP = "write the synthetic IT-support knowledge base as a BEIR folder (qrels/all.tsv)"
PATHS = Paths(outputs={"--output": FOLDER})



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, help="BEIR folder to write (replaced whole)")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..generate import generate, write_generated

    params = params_of(args).generate
    data = generate(params, args.params)
    write_generated(args.output, data)
    paraphrased = sum(q.metadata["style"] == "paraphrase" for q in data.queries.values())
    cues = sum(q.metadata["cue"] is not None for q in data.queries.values())
    print(f"generate (seed {params.seed}, difficulty {params.difficulty}): "
          f"{len(data.corpus)} documents, {len(data.queries)} queries ({paraphrased} paraphrased, "
          f"{cues} with a confusable's words) -> {args.output}")
    return 0
