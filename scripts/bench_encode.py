"""Encode SciFact documents (the first --limit, title + " " + text): our encoder vs sentence-transformers.

Same verified model folder, texts, batch size and max length (256, the model's
sentence-transformers setting). Each contender runs in a fresh process per round after
a one-batch warm-up; docs/s from its fastest round, memory its process's peak RSS
(base: RSS before the timed encode). Goal: ours >= 1.0x sentence-transformers' docs/s.

The race on CPU (``--bf16``) adds each side's fastest path that installs here: ours under
bf16 autocast (``dense.bf16``) against sentence-transformers with its weights in bf16
(``model_kwargs={"torch_dtype": torch.bfloat16}``). Its ONNX and OpenVINO backends are tried
and reported when they cannot load (they need optimum-onnx / optimum-intel, whose releases pin
an older transformers than the project's). Goal there: our fastest >= 1.0x their fastest, with
test nDCG@10 on SciFact within 0.002 of fp32: ``--score`` encodes the whole corpus and the test
claims with each contender and measures them (minutes per contender).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_encode.py [--limit 1000] [--rounds 3] [--bf16] [--score]
        [--json out.json]
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


def _ours_encode(device: str, batch_size: int, bf16: bool):
    from retrieval_lab.encoder import load

    encoder = load(LOCK, device)
    return lambda texts: encoder.encode(texts, batch_size, MAX_LENGTH, bf16)


def _st_encode(device: str, batch_size: int, bf16: bool):
    import torch
    from sentence_transformers import SentenceTransformer

    from retrieval_lab.encoder import resolve_device
    from retrieval_lab.model_files import verify_lock

    kwargs = {"model_kwargs": {"torch_dtype": torch.bfloat16}} if bf16 else {}
    model = SentenceTransformer(str(verify_lock(LOCK)), device=str(resolve_device(device)), trust_remote_code=False,
                                **kwargs)
    assert model.max_seq_length == MAX_LENGTH
    return lambda texts: model.encode(texts, batch_size=batch_size, show_progress_bar=False,
                                      convert_to_numpy=False, convert_to_tensor=True).float().cpu().numpy()


CONTENDERS = {"ours": (_ours_encode, False), "sentence-transformers": (_st_encode, False),
              "ours-bf16": (_ours_encode, True), "sentence-transformers-bf16": (_st_encode, True)}


def contender(name: str, data: str, limit: int, batch_size: int, device: str) -> dict:
    make, bf16 = CONTENDERS[name]
    return _finish(name, make(device, batch_size, bf16), _texts(data, limit), batch_size)


def ours(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("ours", data, limit, batch_size, device)


def sentence_transformers(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("sentence-transformers", data, limit, batch_size, device)


def ours_bf16(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("ours-bf16", data, limit, batch_size, device)


def sentence_transformers_bf16(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("sentence-transformers-bf16", data, limit, batch_size, device)


def backends_tried() -> dict[str, str]:
    """sentence-transformers' other CPU backends: loaded, or the first line of why not."""
    from sentence_transformers import SentenceTransformer

    from retrieval_lab.model_files import verify_lock

    out = {}
    for backend in ("onnx", "openvino"):
        try:
            SentenceTransformer(str(verify_lock(LOCK)), device="cpu", backend=backend, trust_remote_code=False)
            out[backend] = "loaded"
        except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
            out[backend] = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return out


def score(name: str, data: str, batch_size: int, device: str) -> dict:
    """Test nDCG@10 and R@100 on SciFact: every abstract and every test claim encoded by ``name``."""
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import DenseParams
    from retrieval_lab.training.validation import dense_means

    make, bf16 = CONTENDERS[name]
    encode = make(device, batch_size, bf16)

    class Wrapped:  # dense_means calls encode(texts, batch_size, max_length, bf16)
        def encode(self, texts, *_):
            return encode(list(texts))

    dataset = load_dataset(data, ["test"])
    qrels = dataset.qrels["test"]
    seconds, means = _bench.timed(lambda: dense_means(
        Wrapped(), qrels, {q: dataset.queries[q].text for q in qrels},
        {d: dataset.corpus[d].content(["title", "text"]) for d in dataset.corpus},
        DenseParams(batch_size=batch_size, max_seq_length=MAX_LENGTH), 100, ["nDCG@10", "R@100"]))
    return {"contender": name, "seconds": seconds, **means}


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT))
    parser.add_argument("--limit", type=int, default=1000, help="documents to encode (SciFact has 5183)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="race the bf16 paths too (CPU with native bf16)")
    parser.add_argument("--score", action="store_true", help="also SciFact test nDCG@10 of each contender")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    from retrieval_lab.core.params import DenseParams

    DenseParams(batch_size=args.batch_size, device=args.device)  # checked as params.yaml's would be
    contenders = [ours, sentence_transformers] + ([ours_bf16, sentence_transformers_bf16] if args.bf16 else [])
    rows = _bench.compete(contenders, (args.data, args.limit, args.batch_size, args.device), args.rounds)
    for row in rows:
        row["x_st"] = row["docs_per_s"] / rows[1]["docs_per_s"]
    diff = float(np.abs(np.load(OUT / "ours.npy") - np.load(OUT / "sentence-transformers.npy")).max())
    print(_bench.markdown(rows, ["contender", "seconds", "docs_per_s", "x_st", "peak_mb", "base_mb", "rounds"]))
    ratio = rows[0]["x_st"]
    print(f"\n{args.limit} docs, batch {args.batch_size}, device {args.device}; max |ours - st| = {diff:.1e}; "
          f"ours / st docs/s = {ratio:.2f}x (goal >= 1.0x): {'met' if ratio >= 1.0 else 'NOT met'}")
    result = {"rows": rows, "ours_over_st": ratio, "max_abs_diff": diff, "goal": 1.0, "limit": args.limit,
              "batch_size": args.batch_size, "device": args.device}
    if args.bf16:
        race = _race(rows, args)
        result["race"] = race
        print(f"fastest: ours {race['ours']} against {race['peer']}: {race['ratio']:.2f}x; other backends: "
              f"{race['backends']}")
    _bench.write_json(args.json, result)


def _race(rows: list[dict], args) -> dict:
    """Our fastest path against sentence-transformers' fastest that loads here, and (--score) their quality."""
    ours_best = max((r for r in rows if r["contender"].startswith("ours")), key=lambda r: r["docs_per_s"])
    peer_best = max((r for r in rows if r["contender"].startswith("sentence")), key=lambda r: r["docs_per_s"])
    race = {"ours": ours_best["contender"], "peer": peer_best["contender"],
            "ratio": ours_best["docs_per_s"] / peer_best["docs_per_s"], "backends": _bench.isolated(backends_tried)}
    if args.score:
        names = dict.fromkeys(["ours", ours_best["contender"], peer_best["contender"]])
        race["scores"] = [_bench.isolated(score, name, args.data, args.batch_size, args.device) for name in names]
        fp32 = race["scores"][0]["nDCG@10"]
        race["ndcg_gap"] = {s["contender"]: s["nDCG@10"] - fp32 for s in race["scores"]}
    return race


if __name__ == "__main__":
    main()
