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

from pathlib import Path

from ..core.atomic import atomic_path
from ..core.params import Params
from ..page import write_page
from .gather import ReportPaths, gather
from .judge import check_tolerance, decide, judge, key_measures
from .render import markdown, plots, report_page

REPORT = "report.md"
PAGE = "report.html"  # the per-query comparison page (retrieval_lab.page)


def build_report(base: str, head: str | None, out_dir: str | Path, params: Params, repo: str = ".",
                 retrievers: list[str] | None = None, top: int = 10, tolerance: float = 0.0,
                 paths: ReportPaths | None = None, allow_query_change: bool = False) -> dict:
    """Write the folder ``out_dir`` (replaced whole): report.md and PNGs; return per-retriever statistics and the gate's regressions.

    ``paths``: the pipeline's reports, metrics and dvclive folders (default: dvc.yaml's for the dataset).
    """
    check_tolerance(tolerance)
    key_measures(params)  # every name checked before anything is read
    g = gather(base, head, paths or ReportPaths.defaults(params.dataset), list(params.train.variants), repo,
               retrievers)
    j = judge(g, params, tolerance, allow_query_change)
    # one folder output: report.md, its PNGs and the page replace a folder the report wrote (or an empty one) together
    with atomic_path(out_dir, is_dir=True) as folder:
        pngs = plots(g, folder)
        (folder / REPORT).write_text(markdown(g, j, params.dataset, pngs, top, params.evaluate.diagnose_k),
                                     encoding="utf-8")
        write_page(folder / PAGE, report_page(g, j, params))
    return {"retrievers": {r.name: {m: row.to_json() for m, row in r.stats.items()} for r in g.changed},
            "unchanged": [r.name for r in g.retrievers if r.status == "unchanged"], "family": j.family.to_json(),
            "regressions": [{"retriever": n, "measure": m, **row.to_json()} for n, m, row in j.regressions],
            "cannot_judge": [{"retriever": n, "reason": why} for n, why in j.blind],
            "strata": [{"retriever": n, "stratum": s, **row.to_json()} for n, s, row in j.strata],
            "losses": j.losses, "plots": pngs, "metrics_diff": g.diff, "gate": decide(j),
            "query_changes": [{"retriever": n, "vanished": v, "new": w, "common": c}
                              for n, v, w, c in j.query_changes],
            "page": str(Path(out_dir) / PAGE)}
