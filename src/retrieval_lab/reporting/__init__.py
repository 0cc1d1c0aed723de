"""``retrieval-lab report``: what a branch changed, whether the change is real, and what broke.

Three steps, one module each: :mod:`.gather` reads two revisions of the pipeline's results
(git-tracked metrics and DVC-cached per-query values, fetched with ``dvc.api`` from the cache
or the remote; the folders given on the command line), :mod:`.judge` makes the statistics and
the gate's decision, :mod:`.render` writes ``report.md``, first screen first:

1. a verdict line and one row per retriever whose per-query results changed: the key
   measures (``compare.measure`` + ``compare.key_measures``) base -> head, the difference
   with its simultaneous interval across every comparison in the table (the one rule of
   ``stats.paired_comparison``) and its minimum detectable effect; unchanged retrievers
   in one line;
2. the gate: measures whose interval lies entirely below -tolerance (``regressions``), and
   retrievers it cannot judge (``cannot_judge``: per-query results missing at a revision,
   identical while the metrics changed, no query in common): a gate that cannot see fails
   closed instead of reading "no change";
3. the queries that lost most, grouped by the head run's failure-diagnosis class, with
   their first-positive rank before and after;
4. PNG plots (recall@k base vs head, training loss), then the full ``dvc metrics diff``
   (changed values only, measures apart from bookkeeping counts) in a collapsed block.

Beside it, ``report.html``: the same gate and comparisons, and query by query each changed retriever
at base against itself at head, rankings side by side (:mod:`retrieval_lab.page`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.atomic import atomic_path
from ..core.params import Params
from ..page import write_page
from .gather import ReportPaths, gather
from .judge import Judged, check_tolerance, decide, judge, key_measures
from .render import markdown, plots, report_page

REPORT = "report.md"
PAGE = "report.html"  # the per-query comparison page (retrieval_lab.page)


def _rows(judged: list[Judged]) -> tuple[dict, ...]:
    return tuple({"retriever": n, "measure": m, **row.to_json()} for n, m, row in judged)


@dataclass(frozen=True)
class Report:
    """What ``build_report`` wrote and decided: the gate's exit code and why."""

    folder: str
    page: str
    gate: int  # 0, exit_codes.REGRESSION or exit_codes.CANNOT_JUDGE
    gated: tuple[str, ...]  # changed retrievers the gate decided on
    reported: tuple[str, ...]  # changed retrievers shown, not gated
    unchanged: tuple[str, ...]
    family: dict  # the gate's family header (comparison.Family.to_json)
    comparisons: tuple[dict, ...]  # every gated (retriever, measure) comparison
    regressions: tuple[dict, ...]
    cannot_judge: tuple[tuple[str, str], ...]  # (retriever, why)
    query_changes: tuple[tuple[str, int, int, int], ...]  # (retriever, vanished, new, common)
    plots: tuple[str, ...]

    def to_json(self) -> dict:
        return {"folder": self.folder, "page": self.page, "gate": self.gate, "gated": list(self.gated),
                "reported": list(self.reported), "unchanged": list(self.unchanged), "family": self.family,
                "comparisons": list(self.comparisons), "regressions": list(self.regressions),
                "cannot_judge": [{"retriever": n, "reason": why} for n, why in self.cannot_judge],
                "query_changes": [{"retriever": n, "vanished": v, "new": w, "common": c}
                                  for n, v, w, c in self.query_changes],
                "plots": list(self.plots)}


def build_report(base: str, head: str | None, out_dir: str | Path, params: Params, repo: str = ".",
                 retrievers: list[str] | None = None, top: int = 10, tolerance: float = 0.0,
                 paths: ReportPaths | None = None, allow_query_change: bool = False,
                 title: str | None = None) -> Report:
    """Write the folder ``out_dir`` (replaced whole): report.md, its PNGs and report.html; return what the
    gate decided.

    ``paths``: where the results are (default: dvc.yaml's folders for ``params.dataset``); ``title``: the
    collection's name in the headings (default: ``params.dataset``).
    """
    check_tolerance(tolerance)
    key_measures(params)  # every name checked before anything is read
    g = gather(base, head, paths or ReportPaths.defaults(params.dataset), list(params.train.variants), repo,
               retrievers)
    j = judge(g, params, tolerance, allow_query_change)
    title = title or params.dataset
    # one folder output: report.md, its PNGs and the page replace a folder the report wrote (or an empty one) together
    with atomic_path(out_dir, is_dir=True) as folder:
        pngs = plots(g, folder)
        (folder / REPORT).write_text(markdown(g, j, title, pngs, top, params.evaluate.diagnose_k),
                                     encoding="utf-8")
        write_page(folder / PAGE, report_page(g, j, params, title))
    return Report(str(out_dir), str(Path(out_dir) / PAGE), decide(j), j.gated,
                  tuple(r.name for r in g.changed if r.name not in j.gated),
                  tuple(r.name for r in g.retrievers if r.status == "unchanged"), j.family.to_json(),
                  _rows(j.judged), _rows(j.regressions), tuple(j.blind), tuple(j.query_changes), tuple(pngs))
