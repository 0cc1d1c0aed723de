"""Encode SciFact documents (the first --limit, title + " " + text): our encoder vs sentence-transformers.

Same verified model folder, texts, batch size and max length (256, the model's
sentence-transformers setting). Each contender runs in a fresh process per round after
a one-batch warm-up; docs/s from its fastest round, memory its process's peak RSS
(base: RSS before the timed encode). Goal: ours >= 1.0x sentence-transformers' docs/s.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_encode.py [--limit 1000] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _bench

LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
MAX_LENGTH = 256
OUT = Path(tempfile.gettempdir()) / "bench_encode"  # embeddings, to check both agree


def _texts(data: str, limit: int) -> list[str]:
    from retrieval_lab.core.data import read_corpus

    docs = list(read_corpus(Path(data) / "corpus.jsonl").values())[:limit]
    return [doc.content(["title", "text"]) for doc in docs]


def _finish(name: str, encode, texts: list[str], batch_size: int) -> dict:
    import numpy as np

    encode(texts[:batch_size])  # warm-up
    base = _bench.reset_peak()
    seconds, emb = _bench.timed(lambda: encode(texts))
    OUT.mkdir(exist_ok=True)
    np.save(OUT / f"{name}.npy", emb)
    return {"contender": name, "seconds": seconds, "docs_per_s": len(texts) / seconds,
            "peak_mb": _bench.peak_mb(), "base_mb": base}


def ours(data: str, limit: int, batch_size: int, device: str) -> dict:
    from retrieval_lab.encoder import load

    encoder = load(LOCK, device)
    return _finish("ours", lambda texts: encoder.encode(texts, batch_size, MAX_LENGTH), _texts(data, limit),
                   batch_size)


def sentence_transformers(data: str, limit: int, batch_size: int, device: str) -> dict:
    from sentence_transformers import SentenceTransformer

    from retrieval_lab.encoder import resolve_device
    from retrieval_lab.model_files import verify_lock

    model = SentenceTransformer(str(verify_lock(LOCK)), device=str(resolve_device(device)), trust_remote_code=False)
    assert model.max_seq_length == MAX_LENGTH
    return _finish("sentence-transformers",
                   lambda texts: model.encode(texts, batch_size=batch_size, show_progress_bar=False),
                   _texts(data, limit), batch_size)


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT))
    parser.add_argument("--limit", type=int, default=1000, help="documents to encode (SciFact has 5183)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    from retrieval_lab.core.params import DenseParams

    DenseParams(batch_size=args.batch_size, device=args.device)  # checked as params.yaml's would be
    rows = _bench.compete([ours, sentence_transformers], (args.data, args.limit, args.batch_size, args.device),
                          args.rounds)
    for row in rows:
        row["x_st"] = row["docs_per_s"] / rows[1]["docs_per_s"]
    diff = float(np.abs(np.load(OUT / "ours.npy") - np.load(OUT / "sentence-transformers.npy")).max())
    print(_bench.markdown(rows, ["contender", "seconds", "docs_per_s", "x_st", "peak_mb", "base_mb", "rounds"]))
    ratio = rows[0]["x_st"]
    print(f"\n{args.limit} docs, batch {args.batch_size}, device {args.device}; max |ours - st| = {diff:.1e}; "
          f"ours / st docs/s = {ratio:.2f}x (goal >= 1.0x): {'met' if ratio >= 1.0 else 'NOT met'}")
    _bench.write_json(args.json, {"rows": rows, "ours_over_st": ratio, "max_abs_diff": diff, "goal": 1.0,
                                  "limit": args.limit, "batch_size": args.batch_size, "device": args.device})


if __name__ == "__main__":
    main()
