"""What one run trains on: examples (query, positives, mined negatives) and their texts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..batching import Example, build_examples
from ..core.config import TrainParams, TrainVariant
from ..core.data import Dataset
from ..core.errors import InputError
from ..mining import annotated_positives, read_negatives, read_strategy


@dataclass
class TrainingData:
    examples: list[Example]
    relevant: dict[str, set[str]]  # query id -> documents annotated relevant in any split
    query_texts: dict[str, str]
    doc_texts: dict[str, str]


def training_data(dataset: Dataset, negatives: str | Path | list[dict], positives_per_query: int,
                  fields: list[str], at_least: bool = False) -> TrainingData:
    """Examples joined with the dataset (checked by :func:`~retrieval_lab.batching.build_examples`) and
    the texts they use; ``negatives`` is a negatives.jsonl path or records shaped as ``mine`` writes them."""
    records = negatives if isinstance(negatives, list) else read_negatives(negatives)
    source = "<records>" if isinstance(negatives, list) else str(negatives)
    examples = build_examples(dataset, records, positives_per_query, at_least, source)
    docs = {d for e in examples for d in (*e.positives, *e.negatives)}
    return TrainingData(examples, annotated_positives(dataset),
                        {e.query_id: dataset.queries[e.query_id].text for e in examples},
                        {d: dataset.corpus[d].content(fields) for d in sorted(docs)})


def variant_of(params: TrainParams, name: str) -> TrainVariant:
    if name not in params.variants:
        raise InputError(f"unknown variant {name!r} (choices: {', '.join(sorted(params.variants))})",
                         field="--variant")
    return params.variants[name]


def check_negatives_strategy(negatives: str | Path, variant_name: str, variant: TrainVariant) -> None:
    """Refuse a negatives file mined with another strategy than the variant asks for."""
    strategy = read_strategy(negatives)
    if strategy is not None and strategy != variant.negatives:
        raise InputError(f"variant {variant_name!r} trains on {variant.negatives!r} negatives but this file "
                         f"was mined with strategy {strategy!r}", str(negatives))
