"""scripts/bench_faiss.py's real-shaped documents: the real rows kept, unit norms, the real anisotropy, and the
noise scale that gives the calibrated cosine to the origin (no FAISS index is built here)."""

from __future__ import annotations

import numpy as np
import pytest
from beir_fixtures import load_script


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_faiss")


def _anisotropic(n: int = 400, d: int = 16, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, d)).astype(np.float32) * np.geomspace(4.0, 0.1, d).astype(np.float32) + 3.0
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_real_shaped_keeps_the_real_rows_and_follows_their_spread(bench):
    base = _anisotropic()
    out = bench.real_shaped(base, 20_000, scale=0.5, seed=0, block=7_000)
    assert out.shape == (20_000, 16) and np.array_equal(out[:400], base)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    # the noise follows the base's principal directions: the synthetic rows' variance along the base's first
    # principal axis exceeds that along its last, as in the base (a spherical noise would even them out)
    _, _, vt = np.linalg.svd(base - base.mean(0), full_matrices=False)
    synthetic = out[400:] - out[400:].mean(0)
    spread = (synthetic @ vt[0]).var(), (synthetic @ vt[-1]).var()
    assert spread[0] > 20 * spread[1]


def test_calibrate_hits_the_target_cosine_and_the_nearest_other_is_a_median(bench):
    base = _anisotropic()
    sims = base @ base.T
    np.fill_diagonal(sims, -np.inf)
    assert bench.nearest_other_cosine(base) == pytest.approx(float(np.median(sims.max(1))))
    target = 0.95
    scale = bench.calibrate(base, target, seed=0)
    # the same draw calibrate used: row i moved by its own noise, cosine to row i
    rng = np.random.default_rng(0)
    _, s, vt = np.linalg.svd((base - base.mean(0)) / np.sqrt(len(base)), full_matrices=False)
    moved = base + scale * (rng.standard_normal(base.shape, np.float32) @ (s[:, None] * vt).astype(np.float32))
    cos = np.sum(moved * base, 1) / np.linalg.norm(moved, axis=1)
    assert np.median(cos) == pytest.approx(target, abs=1e-4)
