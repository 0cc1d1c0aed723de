"""From judgments to qrels: each pair's final label, merged into existing qrels as ``pool --merge`` merges,
written as BEIR or TREC qrels, with a side file saying who judged each pair and when.

A pair's final label: the adjudicated one where there is a decision; else the label every assessor gave
(one assessor or several agreeing). Pairs whose assessors disagree and no one has adjudicated are
*disputed*: an export with any is refused (it cannot pick a label), naming the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.atomic import atomic_path
from ..core.data import Qrels
from ..core.errors import InputError
from ..core.guard import library_output
from ..core.kinds import PROVENANCE, PROVENANCE_COLUMNS, QRELS  # the provenance header: its signature
from ..judgment_pool import Labels, merge
from .store import Pair, State

FORMATS = ("beir", "trec")


@dataclass(frozen=True)
class Final:
    """The final labels of the pool's judged pairs, in pool order, and how each was reached."""

    labels: dict[Pair, int]
    how: dict[Pair, str]  # "adjudicated" | "agreed" (two or more alike) | "single"
    rows: dict[Pair, int]  # the id of the row that settles it (the decision, else the newest label)
    disputed: tuple[Pair, ...]  # labelled differently, not adjudicated

    @property
    def qrels(self) -> Qrels:
        out: Qrels = {}
        for (q, d), label in self.labels.items():
            out.setdefault(q, {})[d] = label
        return out


def final_labels(state: State, pairs: Sequence[Pair]) -> Final:
    by_pair = state.by_pair()
    labels, how, rows, disputed = {}, {}, {}, []
    for pair in pairs:
        given = by_pair.get(pair, {})
        decision = state.decisions.get(pair)
        if decision is not None:
            labels[pair], how[pair], rows[pair] = decision.label, "adjudicated", decision.id
        elif given and len(set(given.values())) == 1:
            labels[pair] = next(iter(given.values()))
            how[pair] = "agreed" if len(given) > 1 else "single"
            rows[pair] = max(state.labels[(a, *pair)].id for a in given)
        elif given:
            disputed.append(pair)
    return Final(labels, how, rows, tuple(disputed))


@dataclass(frozen=True)
class Export:
    """An export's qrels (existing judgments first, then the new ones in pool order) and its counts."""

    qrels: Qrels
    new: int
    already_judged_same: int
    judgments: int
    unjudged: int  # pool pairs without a final label (not exported)

    def to_json(self) -> dict:
        return {"new": self.new, "already_judged_same": self.already_judged_same, "judgments": self.judgments,
                "unjudged": self.unjudged}


def merged_qrels(final: Final, existing: Qrels, pool_size: int, source: str) -> Export:
    """``existing`` plus the final labels, under ``pool --merge``'s rule: an existing judgment is kept, a final
    label contradicting it refused (one line naming the database row)."""
    if final.disputed:
        q, d = final.disputed[0]
        raise InputError(f"{len(final.disputed)} pair(s) labelled differently and not adjudicated, first ({q}, {d}): "
                         "settle them in the page's adjudication view first", source, field="--export")
    labels = Labels(final.qrels, dict(final.rows), 0)
    merged, report = merge(existing, labels, source)
    return Export(merged, report["added"], report["already_judged_same"], report["judgments"],
                  pool_size - len(final.labels))


def write_qrels_file(path: str | Path, qrels: Qrels, fmt: str) -> None:
    """BEIR (``query-id corpus-id score`` with its header, tab-separated) or TREC (``qid 0 docid rel``)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (choices: {', '.join(FORMATS)})", field="--format")
    library_output(path, "write_qrels_file", QRELS)  # over earlier qrels only (never the pool); never in a BEIR folder
    with atomic_path(path, kind=QRELS) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        if fmt == "beir":
            fh.write("query-id\tcorpus-id\tscore\n")
            for qid, judged in qrels.items():
                fh.writelines(f"{qid}\t{did}\t{rel}\n" for did, rel in judged.items())
        else:
            for qid, judged in qrels.items():
                fh.writelines(f"{qid} 0 {did} {rel}\n" for did, rel in judged.items())


def provenance_rows(final: Final, state: State) -> list[tuple[str, ...]]:
    """One row per label in force behind each exported pair (and one for its decision): who, what, when."""
    rows = []
    by_pair = state.by_pair()
    for pair, label in final.labels.items():
        for assessor in sorted(by_pair.get(pair, {})):
            row = state.labels[(assessor, *pair)]
            rows.append((*pair, str(label), final.how[pair], assessor, "label", str(row.label), row.time))
        decision = state.decisions.get(pair)
        if decision is not None:
            rows.append((*pair, str(label), final.how[pair], decision.assessor, "adjudicate", str(decision.label),
                         decision.time))
    return rows


def write_provenance(path: str | Path, rows: list[tuple[str, ...]]) -> None:
    library_output(path, "write_provenance", PROVENANCE)
    with atomic_path(path, kind=PROVENANCE) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\t".join(PROVENANCE_COLUMNS) + "\n")
        fh.writelines("\t".join(row) + "\n" for row in rows)
