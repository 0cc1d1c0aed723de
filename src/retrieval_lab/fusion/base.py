"""What fusion methods share."""

from __future__ import annotations

from ..runs import ranked


def top_depth(docs: dict[str, float], depth: int) -> list[tuple[str, float]]:
    """A query's documents in trec_eval order, cut to ``depth``: fusion reads only these."""
    return ranked(docs)[:depth]
