"""scripts/_bench.py's host-speed probe, which a long bench records before and after each contender."""

from __future__ import annotations

import time

import pytest
from beir_fixtures import load_script


@pytest.fixture(scope="module")
def bench():
    yield from load_script("_bench")


def test_the_loop_is_timed_in_process_cpu_and_the_matmul_in_flops(bench, monkeypatch):
    small, large = bench.host_speed(100_000, 64), bench.host_speed(1_000_000, 64)
    assert small["additions"] == 100_000 and large["additions"] == 1_000_000
    assert 0 < small["loop_cpu_s"] and large["loop_cpu_s"] > 3 * small["loop_cpu_s"]  # ten times the work
    assert small["matmul_gflops"] > 0
    # the loop's time is the process's CPU time, not the wall's: time another process's share took is not counted
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(time, "process_time", lambda: next(clock))
    monkeypatch.setattr(bench, "timed", lambda fn: (fn(), 0.002)[::-1])  # each 64-square matmul: 2 ms
    probed = bench.host_speed(10, 64)
    assert probed["loop_cpu_s"] == 2.5
    assert probed["matmul_gflops"] == round(2 * 64 ** 3 / 0.002 / 1e9, 1)
