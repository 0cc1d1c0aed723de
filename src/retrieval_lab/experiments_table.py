"""One table over experiments: collection x retriever, seeds pooled, every cell against a baseline.

Two steps, so that a committed table can be re-rendered from committed inputs:

``gather``  reads each chosen experiment (the workspace, a git revision or a DVC experiment, never checked
            out: files at a revision come through ``dvc.fs.DVCFileSystem``, git for tracked files and the
            DVC cache for outputs) into plain data: its name, commit, flattened params and every run's
            per-query measures from ``reports/<dataset>/<run>/per_query.json``.
``build``   groups the experiments into collections (``dataset``) and seeds (experiments that differ only
            in ``train.seed``), and compares each retriever with the baseline under compare's rule
            (``stats.paired_comparison``: Bonferroni across every cell of the table, sign-flip intervals).

A cell's difference is taken on per-query values averaged over seeds first, so the test sees one
value per query and the seeds' noise is averaged out of it rather than counted as extra queries.

The last row (two or more collections) is the BEIR-style average over collections: mean over
collections of each collection's mean. Its test flips the sign of each query's difference weighted by
``N / (K n_c)`` (N queries in all, K collections, n_c in the query's collection): the weighted mean is
that average, and since every query keeps its own collection (signs never move a value between
collections) the test is stratified by collection.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path

import numpy as np

from . import stats
from .comparison import per_query_measures, values_of
from .core.errors import InputError
from .core.kinds import PLOT_SOFTWARE, TABLE_CSV_FIELDS
from .core.params_file import dotted_items, parse_yaml

SEED_KEY = "train.seed"
AVERAGE = "average"  # the last row's label


# ----------------------------------------------------------------------------- gather

def open_experiment(repo: Path, spec: str):
    """(name, commit, baseline commit, reader(path) -> text) of one experiment spec; the reader raises
    FileNotFoundError. A DVC experiment's baseline is the commit it was run on; a revision is its own."""
    from dvc.repo.experiments.utils import resolve_name
    from scmrepo.exceptions import SCMError
    from scmrepo.git import Git

    try:
        scm = Git(str(repo))
        head = scm.get_rev()
    except Exception:  # noqa: BLE001 - scmrepo raises several kinds for "not a git repository"
        raise InputError("not a git repository with a commit", str(repo)) from None
    if spec == "workspace":
        return "workspace", head, head, lambda path: (repo / path).read_text(encoding="utf-8")
    try:
        ref = resolve_name(scm, spec).get(spec)
    except Exception as exc:  # noqa: BLE001 - AmbiguousExpRefInfo and friends
        raise InputError(f"experiment {spec!r}: {exc}", str(repo)) from None
    try:
        commit = scm.get_ref(str(ref)) if ref is not None else scm.resolve_rev(spec)
    except SCMError:
        commit = None
    if commit is None:
        raise InputError(f"experiment {spec!r} not found: neither a DVC experiment (dvc exp show) nor a git "
                         "revision", str(repo))
    from dvc.fs import DVCFileSystem

    fs = DVCFileSystem(repo=str(repo), rev=commit)
    baseline = ref.baseline_sha if ref is not None else commit
    return spec, commit, baseline, lambda path: fs.read_text(path, encoding="utf-8")


def read_experiment_file(reader, path: str, name: str) -> str:
    try:
        return reader(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise InputError(f"experiment {name!r} has no {path} (not in that commit, nor in the DVC cache: "
                         "dvc pull or dvc exp pull it)", path) from None
    except Exception as exc:  # noqa: BLE001 - the DVC cache reports a missing object in several ways
        raise InputError(f"experiment {name!r}: cannot read {path} ({type(exc).__name__}: {exc})", path) from None


def experiment_params(reader, name: str) -> dict:
    """An experiment's params.yaml as flattened keys, read as params are read (YAML 1.2 floats, no key twice)."""
    import yaml

    try:
        return dotted_items(parse_yaml(read_experiment_file(reader, "params.yaml", name)) or {})
    except yaml.YAMLError as exc:
        raise InputError(f"experiment {name!r}: invalid YAML ({exc})", "params.yaml") from None


def gather(repo: str | Path, specs: list[str], runs: list[str], measures: list[str]) -> dict:
    """Read ``specs`` (``workspace``, git revisions, DVC experiment names or refs) from the repository
    ``repo``: for each, its name, commit, flattened params.yaml and ``runs`` -> query -> measure -> value."""
    repo = Path(repo)
    experiments = []
    for name, commit, baseline, reader in [open_experiment(repo, spec) for spec in specs]:  # every name resolved before any read
        params = experiment_params(reader, name)
        dataset = params.get("dataset")
        if not isinstance(dataset, str):
            raise InputError(f"experiment {name!r}: params.yaml names no dataset", "params.yaml", field="dataset")
        found = {}
        for run in runs:
            path = f"reports/{dataset}/{run}/per_query.json"
            entries = per_query_measures(read_experiment_file(reader, path, name), f"{name}:{path}")
            by_measure = {m: values_of(entries, m, f"{name}:{path}") for m in measures}
            found[run] = {q: {m: by_measure[m][q] for m in measures} for q in sorted(entries)}
        experiments.append({"name": name, "commit": commit, "baseline": baseline, "params": params,
                            "runs": found})
    return {"runs": list(runs), "measures": list(measures), "experiments": experiments}


_KINDS = {dict: "an object", list: "a list", str: "a string", float: "a number"}


def check_inputs(inputs, source: str) -> dict:
    """``inputs`` as :func:`gather` returns them, or an InputError naming ``source`` and the first field that
    is not (a file written by ``--inputs`` and edited, or another JSON file)."""
    def expect(value, kind, field):
        ok = isinstance(value, (int, float) if kind is float else kind) and not isinstance(value, bool)
        if not ok:
            raise InputError(f"expected {_KINDS[kind]}, got {type(value).__name__}", source, field=field or None)
        return value

    def has(obj, key, at):
        if key not in obj:
            raise InputError("missing field (expected the JSON that --inputs writes)", source, field=at + key)
        return obj[key]

    expect(inputs, dict, "")
    for key in ("runs", "measures"):
        for i, item in enumerate(expect(has(inputs, key, ""), list, key)):
            expect(item, str, f"{key}[{i}]")
    measures = inputs["measures"]
    for i, e in enumerate(expect(has(inputs, "experiments", ""), list, "experiments")):
        at = f"experiments[{i}]"
        expect(e, dict, at)
        expect(has(e, "name", at + "."), str, f"{at}.name")
        expect(has(expect(has(e, "params", at + "."), dict, f"{at}.params"), "dataset", f"{at}.params."), str,
               f"{at}.params.dataset")
        for run, queries in expect(has(e, "runs", at + "."), dict, f"{at}.runs").items():
            for qid, values in expect(queries, dict, f"{at}.runs.{run}").items():
                expect(values, dict, f"{at}.runs.{run}.{qid}")
                for m in measures:
                    expect(has(values, m, f"{at}.runs.{run}.{qid}."), float, f"{at}.runs.{run}.{qid}.{m}")
    return inputs


# ----------------------------------------------------------------------------- build

def differing_params(experiments: list[dict]) -> list[str]:
    """Params keys whose values are not the same in every experiment (a key missing somewhere differs)."""
    keys = sorted({k for e in experiments for k in e["params"]})
    return [k for k in keys if len({json.dumps(e["params"].get(k), sort_keys=True) for e in experiments}) > 1]


def _collections(experiments: list[dict]) -> dict[str, list[dict]]:
    """dataset -> its experiments in seed order; experiments of one dataset may differ only in train.seed."""
    groups: dict[str, list[dict]] = {}
    for e in experiments:
        groups.setdefault(e["params"]["dataset"], []).append(e)
    for dataset, group in groups.items():
        first = group[0]
        for other in group[1:]:
            keys = [k for k in differing_params([first, other]) if k != SEED_KEY]
            if keys:
                raise InputError(f"experiments {first['name']!r} and {other['name']!r} both measure {dataset!r} "
                                 f"but differ in {', '.join(keys)}: only {SEED_KEY} may differ within a collection")
            if first["params"].get(SEED_KEY) == other["params"].get(SEED_KEY) and first is not other:
                raise InputError(f"experiments {first['name']!r} and {other['name']!r} are the same collection "
                                 f"{dataset!r} and seed {first['params'].get(SEED_KEY)}: choose one")
        group.sort(key=lambda e: json.dumps(e["params"].get(SEED_KEY)))
    return groups


def _aligned(group: list[dict], runs: list[str], dataset: str) -> list[str]:
    """The one query set of every run in every experiment of a collection, or an error naming the file."""
    ref_exp, ref_run = group[0], runs[0]
    queries = set(ref_exp["runs"][ref_run])
    for e in group:
        for run in runs:
            if run not in e["runs"]:
                raise InputError(f"experiment {e['name']!r} has no run {run!r}",
                                 f"reports/{dataset}/{run}/per_query.json")
            got = set(e["runs"][run])
            if got != queries:
                only = sorted(got ^ queries)
                raise InputError(
                    f"experiment {e['name']!r} run {run!r} was evaluated on other queries than experiment "
                    f"{ref_exp['name']!r} run {ref_run!r} ({len(got)} vs {len(queries)}; {len(only)} in only "
                    f"one, e.g. {only[0]!r})", f"reports/{dataset}/{run}/per_query.json")
    return sorted(queries)


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def build(inputs: dict, baseline: str, family_level: float = 0.95, permutations: int = 10000,
          seed: int = 0) -> dict:
    """The table: per measure, collection (and the average row) -> retriever -> cell.

    A cell holds ``seeds`` (each seed's mean), ``mean`` and ``sd`` over seeds (sd None for one seed) and,
    for every retriever but the baseline, ``comparison``: the difference with the baseline on the per-query
    values averaged over seeds, its simultaneous interval and adjusted p. The family is every such
    comparison of the table (all measures, collections and the average row), as compare judges its pairs.
    """
    runs, measures, experiments = inputs["runs"], inputs["measures"], inputs["experiments"]
    if baseline not in runs:
        raise InputError(f"baseline {baseline!r} is not among the runs read ({', '.join(runs)})", field="--baseline")
    if not experiments:
        raise InputError("no experiment chosen", field="--experiments")
    groups = _collections(experiments)
    names = sorted(groups)
    rows = names + ([AVERAGE] if len(names) > 1 else [])
    family = len(rows) * (len(runs) - 1) * len(measures)
    # dataset -> run -> measure -> (seeds x queries) array
    values = {}
    for dataset, group in groups.items():
        queries = _aligned(group, runs, dataset)
        values[dataset] = {r: {m: np.array([[e["runs"][r][q][m] for q in queries] for e in group])
                               for m in measures} for r in runs}
    seed_sets = {tuple(json.dumps(e["params"].get(SEED_KEY)) for e in g) for g in groups.values()}
    table: dict[str, dict[str, dict]] = {}
    for m in measures:
        table[m] = {}
        for row in rows:
            table[m][row] = {}
            for r in runs:
                table[m][row][r] = _cell(values, names if row == AVERAGE else [row], r, baseline, m,
                                         row == AVERAGE and len(seed_sets) != 1,
                                         family, family_level, permutations, seed)
    collections = {d: [{"name": e["name"], "commit": e["commit"], "baseline": e.get("baseline", e["commit"]),
                        "seed": e["params"].get(SEED_KEY)}
                       for e in g] for d, g in groups.items()}
    return {"measures": measures, "runs": runs, "baseline": baseline, "rows": rows, "collections": collections,
            "differing_params": {e["name"]: {k: e["params"].get(k) for k in differing_params(experiments)}
                                 for e in experiments},
            "adjustment": stats.ADJUSTMENT, "family_size": family, "family_level": family_level,
            "level": 1 - (1 - family_level) / family, "permutations": permutations, "seed": seed, "table": table}


def _cell(values: dict, datasets: list[str], run: str, baseline: str, measure: str, seeds_unpaired: bool,
          family: int, family_level: float, permutations: int, seed: int) -> dict:
    """One collection's cell, or with several datasets the average row's (each collection weighs 1/K)."""
    k = len(datasets)
    per_seed = [values[d][run][measure].mean(axis=1) for d in datasets]  # K x (seeds,)
    if seeds_unpaired:  # collections ran different seeds: no per-seed average, hence no sd
        seeds, (mean, sd) = [], (float(np.mean([s.mean() for s in per_seed])), None)
    else:
        seeds = [float(x) for x in np.mean(per_seed, axis=0)]
        mean, sd = _mean_sd(seeds)
    cell = {"seeds": seeds, "mean": mean, "sd": sd}
    if run == baseline:
        return cell
    base = [values[d][baseline][measure].mean(axis=0) for d in datasets]  # K x (n_c,): averaged over seeds
    cand = [values[d][run][measure].mean(axis=0) for d in datasets]
    total = sum(len(b) for b in base)
    weights = np.concatenate([np.full(len(b), total / (k * len(b))) for b in base])  # 1 for one collection
    c = stats.paired_comparison(np.concatenate(base) * weights, np.concatenate(cand) * weights, family,
                                family_level, permutations, seed)
    cell["comparison"] = {"difference": c.mean_difference, "low": c.low, "high": c.high,
                          "p_adjusted": c.p_adjusted, "excludes_zero": c.excludes_zero, "queries": c.queries,
                          "tail": c.tail}
    return cell


# ----------------------------------------------------------------------------- render

def _num(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    return f"{x:+.4f}" if sign else f"{x:.4f}"


def _cell_text(cell: dict) -> str:
    text = _num(cell["mean"]) + ("" if cell["sd"] is None else f" ± {cell['sd']:.4f}")
    c = cell.get("comparison")
    if c is not None:
        mark = " *" if c["excludes_zero"] else ""
        text += f" ({_num(c['difference'], True)} [{_num(c['low'], True)}, {_num(c['high'], True)}]{mark})"
    return text


def _row_label(result: dict, row: str) -> str:
    if row == AVERAGE:
        return f"average ({len(result['collections'])} collections)"
    n = len(result['collections'][row])
    return f"{row} ({n} seed{'s' if n != 1 else ''})"


def to_markdown(result: dict) -> str:
    """Markdown: a table per measure, the rule, and where every row's numbers came from."""
    base, level = result["baseline"], result["family_level"]
    lines = ["# Retrievers across collections and seeds", "",
             (f"Each cell: mean ± sample standard deviation over training seeds (each seed's mean over the test "
              f"queries); then, for every retriever but `{base}`, the difference from `{base}` on per-query "
              f"values averaged over seeds, and its {level:.0%} simultaneous interval across the "
              f"{result['family_size']} comparisons of this table ({result['adjustment'].capitalize()}: "
              f"{result['level']:.2%} each, a paired sign-flip test inverted: {result['permutations']} random "
              f"sign assignments, seed {result['seed']}; the rule of `retrieval-lab compare`). "
              "`*`: the interval excludes 0."), ""]
    if AVERAGE in result["rows"]:
        lines += [("The average row is the mean over collections of each collection's mean (BEIR style); its "
                   "interval comes from the same test on every query's difference weighted so that each "
                   "collection counts equally, signs flipped query by query within its collection."), ""]
    for m in result["measures"]:
        table = result["table"][m]
        lines += [f"## {m}", "", "| collection | " + " | ".join(result["runs"]) + " |",
                  "|---|" + "---:|" * len(result["runs"])]
        for row in result["rows"]:
            lines.append(f"| {_row_label(result, row)} | "
                         + " | ".join(_cell_text(table[row][r]) for r in result["runs"]) + " |")
        lines.append("")
    lines += ["## Experiments", "", "| collection | experiment | commit (baseline) | params that differ |",
              "|---|---|---|---|"]
    for dataset, members in result["collections"].items():
        for e in members:
            diff = result["differing_params"][e["name"]]
            text = ", ".join(f"{k}={json.dumps(v)}" for k, v in diff.items()) or "-"
            lines.append(f"| {dataset} | {e['name']} | {e['commit'][:7]} ({e['baseline'][:7]}) | {text} |")
    notes = []
    cells = [c["comparison"] for m in result["measures"] for row in result["table"][m].values()
             for c in row.values() if "comparison" in c]
    if any(math.isinf(c["low"]) or math.isinf(c["high"]) for c in cells):
        notes.append("Note: an unbounded interval means too few queries for that level.")
    if any(c["tail"] < 10 for c in cells):
        notes.append(f"Note: fewer than 10 sign flips beyond each end of some intervals; raise "
                     f"evaluate.permutations (now {result['permutations']}) for steadier interval ends.")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


CSV_FIELDS = list(TABLE_CSV_FIELDS)  # its header is its signature (core.kinds)


def to_csv(result: dict) -> str:
    """One line per measure x row x retriever; the comparison columns are empty for the baseline."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for m in result["measures"]:
        for row in result["rows"]:
            members = [e["name"] for d in (result["collections"] if row == AVERAGE else [row])
                       for e in result["collections"][d]]
            for r in result["runs"]:
                cell = result["table"][m][row][r]
                c = cell.get("comparison", {})
                writer.writerow({
                    "measure": m, "collection": row, "retriever": r, "seeds": len(cell["seeds"]) or "",
                    "mean": f"{cell['mean']:.6f}", "sd": "" if cell["sd"] is None else f"{cell['sd']:.6f}",
                    "baseline": result["baseline"],
                    **({k: f"{c[k]:.6f}" for k in ("difference", "low", "high", "p_adjusted")} if c else {}),
                    "excludes_zero": str(c["excludes_zero"]).lower() if c else "", "experiments": " ".join(members)})
    return out.getvalue()


def plot(result: dict, path: str | Path, measure: str | None = None) -> None:
    """One PNG: per collection (and the average), each retriever's mean with its seed sd, and each
    difference from the baseline with its simultaneous interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = measure or result["measures"][0]
    table, runs, rows = result["table"][m], result["runs"], result["rows"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6, 1.2 * len(runs) * len(rows) / 2 + 3), 7))
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        x = np.arange(len(rows)) + (i - (len(runs) - 1) / 2) * width
        cells = [table[row][r] for row in rows]
        top.bar(x, [c["mean"] for c in cells], width, yerr=[c["sd"] or 0 for c in cells], label=r, capsize=2,
                color=f"C{i}")  # one colour per retriever in both panels
        if r == result["baseline"]:
            continue
        comps = [c["comparison"] for c in cells]
        diff = np.array([c["difference"] for c in comps])
        lows = np.array([c["low"] for c in comps])
        highs = np.array([c["high"] for c in comps])
        finite_low = np.where(np.isinf(lows), diff, lows)  # an unbounded end is drawn as no whisker
        finite_high = np.where(np.isinf(highs), diff, highs)
        bottom.errorbar(x, diff, yerr=[diff - finite_low, finite_high - diff], fmt="o", capsize=3, label=r,
                        color=f"C{i}")
    labels = [_row_label(result, row) for row in rows]
    top.set_xticks(np.arange(len(rows)), labels)
    top.set_ylabel(f"{m} (mean ± sd over seeds)")
    top.legend(fontsize="small", ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    bottom.axhline(0, color="gray", linewidth=0.8)
    bottom.set_xticks(np.arange(len(rows)), labels)
    bottom.set_ylabel(f"difference from {result['baseline']}")
    bottom.set_title(f"{result['family_level']:.0%} simultaneous intervals ({result['family_size']} comparisons)",
                     fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png", metadata={"Software": PLOT_SOFTWARE})  # its signature (core.kinds)
    plt.close(fig)
