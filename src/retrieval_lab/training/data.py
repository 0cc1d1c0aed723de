"""What one run trains on: examples (query, positives, mined negatives) and their texts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.data import Dataset
from ..core.errors import InputError
from ..mining import annotated_positives
from ..negatives import MinedQuery, read_negatives, read_strategy
from .batching import Example, build_examples
from .corpus_pairs import CorpusPairs, corpus_pairs
from .spec import TrainSpec


@dataclass
class TrainingData:
    examples: list[Example]
    relevant: dict[str, set[str]]  # query id -> documents annotated relevant in any split
    query_texts: dict[str, str]
    doc_texts: dict[str, str]
    # query side (TrainSpec.query_side, set by with_frozen_documents): every document's frozen embedding,
    # the candidates of each step
    doc_ids: list[str] | None = None
    doc_matrix: torch.Tensor | None = None  # N x H, float32, unit rows
    doc_column: dict[str, int] | None = None  # document id -> its row in doc_matrix
    pseudo: dict | None = None  # pairs from the corpus (CorpusPairs.summary), when the variant draws some

    def corpus_mask(self, query_ids: list[str]) -> torch.Tensor:
        """``[B, N]``: document ``j`` of ``doc_ids`` is annotated relevant to query ``i`` (any split)."""
        column = self.doc_column
        mask = torch.zeros(len(query_ids), len(self.doc_ids), dtype=torch.bool)  # B x N
        for i, qid in enumerate(query_ids):
            for did in self.relevant.get(qid, ()):
                if did in column:
                    mask[i, column[did]] = True
        return mask


def with_frozen_documents(data: TrainingData, embeddings) -> TrainingData:
    """``data`` for query-side training against ``embeddings`` (an embeddings folder's documents), which must
    hold every document the examples name."""
    missing = sorted({d for e in data.examples for d in e.positives} - set(embeddings.doc_ids))
    if missing:
        raise InputError(f"{len(missing)} training positives have no base embedding (first: {missing[0]}): "
                         "embeddings of another dataset?", field="--base-embeddings")
    doc_ids = list(embeddings.doc_ids)
    return TrainingData(data.examples, data.relevant, data.query_texts, data.doc_texts, doc_ids,
                        torch.from_numpy(embeddings.doc_embeddings).float(), {d: j for j, d in enumerate(doc_ids)},
                        data.pseudo)


def training_data(dataset: Dataset, negatives: str | Path | list[MinedQuery], positives_per_query: int,
                  fields: list[str], at_least: bool = False, spec: TrainSpec | None = None) -> TrainingData:
    """Examples joined with the dataset (checked by :func:`~retrieval_lab.training.batching.build_examples`) and
    the texts they use; ``negatives`` is a negatives.jsonl path or ``mine``'s records. A ``spec`` whose
    variant sets ``corpus_queries`` adds that many pseudo-query pairs drawn by ``train.seed``
    (:func:`~retrieval_lab.training.corpus_pairs.corpus_pairs`)."""
    records = negatives if isinstance(negatives, list) else read_negatives(negatives)
    source = "<records>" if isinstance(negatives, list) else str(negatives)
    examples = build_examples(dataset, records, positives_per_query, at_least, source)
    docs = {d for e in examples for d in (*e.positives, *e.negatives)}
    data = TrainingData(examples, annotated_positives(dataset),
                        {e.query_id: dataset.queries[e.query_id].text for e in examples},
                        {d: dataset.corpus[d].content(fields) for d in sorted(docs)})
    if spec is None or not spec.variant.corpus_queries:
        return data
    return _with_pairs(data, corpus_pairs(dataset, spec.variant.corpus_queries, spec.variant.corpus_query_kind,
                                          spec.train.seed, fields))


def _with_pairs(data: TrainingData, pairs: CorpusPairs) -> TrainingData:
    """``data`` and ``pairs`` mixed (examples sorted by query id); a labelled query relevant to a document is
    also relevant to the synthetic positive cut from it, which is that document less a sentence."""
    cut_from: dict[str, set[str]] = {}
    for pid, did in pairs.original.items():
        cut_from.setdefault(did, set()).add(pid)
    relevant = {q: set(docs) for q, docs in data.relevant.items()}
    for e in data.examples:
        relevant.setdefault(e.query_id, set()).update(p for d in data.relevant.get(e.query_id, ()) for p in cut_from.get(d, ()))
    relevant.update({q: set(docs) for q, docs in pairs.relevant.items()})
    return TrainingData(sorted(data.examples + pairs.examples, key=lambda e: e.query_id), relevant,
                        {**data.query_texts, **pairs.query_texts}, {**data.doc_texts, **pairs.doc_texts},
                        pseudo=pairs.summary())


def check_negatives_strategy(negatives: str | Path, spec: TrainSpec) -> None:
    """Refuse a negatives file mined with another strategy than the variant asks for."""
    strategy = read_strategy(negatives)
    if strategy is not None and strategy != spec.negatives:
        raise InputError(f"variant {spec.name!r} trains on {spec.negatives!r} negatives but this file "
                         f"was mined with strategy {strategy!r}", str(negatives))
