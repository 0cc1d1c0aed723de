"""``retrieval-lab judge``: label a pool in the browser; print where a session stands (--summary); or export
its labels as qrels (--export)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.guard import FILE, FOLDER, Found, Paths
from ..core.kinds import JUDGMENTS, PROVENANCE, QRELS
from ..core.params_cli import add_params_args, params_of

HELP = ("label a pool in the browser: several assessors, their agreement, adjudication and the judgments that "
        "would change a comparison; --export writes the labels as qrels")
PROVENANCE_SUFFIX = ".provenance.tsv"


def _provenance(args: argparse.Namespace) -> Found:
    """The export's side file (who judged each pair, when) beside it unless --provenance names one, and the
    pool the database was made from (an input of the export: never replaced by it)."""
    from ..judging.store import recorded_pool

    pool = recorded_pool(args.db) if args.export is not None else None
    found = Found(inputs={"--db's pool": [(Path(pool), FILE)]} if pool else {})
    if args.export is not None and args.provenance is None:
        found.outputs["--provenance"] = (Path(args.export + PROVENANCE_SUFFIX), FILE)
        found.kinds["--provenance"] = PROVENANCE
    return found


PATHS = Paths(inputs={"--pool": FILE, "--dataset": FOLDER, "--qrels": FILE, "--base": FILE, "--head": FILE},
              outputs={"--db": FILE, "--export": FILE, "--provenance": FILE},
              words=("assessors", "host", "measure"), derive=_provenance,
              kinds={"--db": JUDGMENTS, "--export": QRELS, "--provenance": PROVENANCE})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, metavar="FILE",
                        help="the judgments (SQLite): made on first use, resumed after")
    parser.add_argument("--pool", metavar="POOL.tsv", help="the pool to judge (`retrieval-lab pool --runs`)")
    parser.add_argument("--dataset", metavar="DIR", help="BEIR folder: ids checked, whole texts shown "
                                                         "(else the pool's 300-character snippets)")
    parser.add_argument("--qrels", metavar="FILE", help="existing judgments: the comparison before the session; "
                                                        "kept by --export, which refuses a label contradicting one")
    parser.add_argument("--base", metavar="RUN", help="with --head: two runs whose comparison the judging should "
                                                      "settle (the judgments that matter first)")
    parser.add_argument("--head", metavar="RUN", help="the run compared with --base")
    parser.add_argument("-m", "--measure", metavar="MEASURE", help="their key measure (default judge.measure, "
                                                                   "else compare.measure)")
    parser.add_argument("--assessors", metavar="A,B,...", help="assign the queries to these assessors, a share "
                                                               "judge.overlap of them to all (default: anyone "
                                                               "judges everything)")
    parser.add_argument("--min-label", type=int, help="smallest label (default judge.min_label)")
    parser.add_argument("--max-label", type=int, help="largest label (default judge.max_label)")
    parser.add_argument("--host", help="address to serve on (default judge.host, 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, help="port (default judge.port; 0: a free one)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--export", metavar="QRELS", help="write the final labels (plus --qrels) as qrels and stop")
    mode.add_argument("--summary", action="store_true", help="print progress, agreement and, with --base and "
                                                             "--head, the judgments that matter, as JSON, and stop")
    parser.add_argument("--format", choices=("beir", "trec"), default="beir", help="qrels format of --export")
    parser.add_argument("--provenance", metavar="FILE", help="who judged each exported pair and when (default: "
                                                             f"the export's path + {PROVENANCE_SUFFIX})")
    add_params_args(parser)


def _labels(args: argparse.Namespace, params):
    from ..judging import LabelRange

    if args.min_label is None and args.max_label is None:
        return None
    return LabelRange(params.judge.min_label if args.min_label is None else args.min_label,
                      params.judge.max_label if args.max_label is None else args.max_label)


def _export(args: argparse.Namespace, params) -> int:
    from ..core.data import read_corpus, read_qrels, read_queries
    from ..judging import export, read_pool
    from ..judging.store import open_store

    queries = corpus = None
    if args.dataset:
        from ..core.data import corpus_file, queries_file

        queries, corpus = read_queries(queries_file(args.dataset)), read_corpus(corpus_file(args.dataset))
    pool = read_pool(args.pool, queries, corpus) if args.pool else None
    store = open_store(args.db, pool, _labels(args, params), readonly=True)
    state = store.state()
    final = export.final_labels(state, store.pairs)
    existing = read_qrels(args.qrels, queries, corpus) if args.qrels else {}
    result = export.merged_qrels(final, existing, len(store.pairs), args.db)
    provenance = args.provenance or args.export + PROVENANCE_SUFFIX
    export.write_qrels_file(args.export, result.qrels, args.format)
    export.write_provenance(provenance, export.provenance_rows(final, state))
    print(f"export: {result.new} new judgments ({result.already_judged_same} agreeing with existing ones), "
          f"{result.unjudged} pool pairs without a final label; {result.judgments} judgments -> {args.export}; "
          f"who judged each and when -> {provenance}")
    return 0


def _serve(session, host: str, port: int) -> int:
    import signal

    from ..judging.server import JudgeServer, is_loopback

    server = JudgeServer(session, host, port)

    def stop(signum, frame):
        raise KeyboardInterrupt

    # SIGINT too: a shell script's background job (`retrieval-lab judge ... &`) inherits SIGINT ignored, and
    # Python then installs no Ctrl-C handler of its own; `kill -INT` must still stop the server cleanly
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    labelled = len(session.store.state().labels)
    print(f"judge: {len(session.pool.items)} pairs of {len(session.pool.queries)} queries from {session.pool.source}; "
          f"judgments in {session.store.path} ({labelled} labels so far)")
    if not is_loopback(host):
        print(f"judge: serving on {host}: anyone who can reach this machine and has the address below can judge")
    print(f"open {server.url} (Ctrl-C stops; every label is saved as it is made)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        session.store.close()  # the last connection closed: SQLite folds its WAL back into the file
    print("judge: stopped")
    return 0


def run(args: argparse.Namespace) -> int:
    import json

    from ..core.errors import InputError
    from ..judging import open_session

    params = params_of(args)
    if args.port is not None and not 0 <= args.port <= 65535:
        raise InputError(f"port {args.port} outside 0..65535", field="--port")
    if args.export:
        return _export(args, params)
    if args.pool is None:
        raise InputError("judging needs the pool: --pool POOL.tsv (`retrieval-lab pool --runs ...` writes one)",
                         field="--pool")
    assessors = [a.strip() for a in args.assessors.split(",")] if args.assessors else None
    session = open_session(args.pool, args.db, params, args.dataset, args.qrels, args.base, args.head,
                           _labels(args, params), assessors, args.measure)
    if args.summary:
        out = {"pairs": len(session.pool.items), "assessors": {}, "agreement": session.agreement().to_json()}
        state = session.store.state()
        for name in session.assessors() or state.assessors():
            out["assessors"][name] = session.view(name).progress.to_json()
        if session.comparison is not None:
            out["sensitivity"] = session.sensitivity().to_json()
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    return _serve(session, args.host or params.judge.host, params.judge.port if args.port is None else args.port)
