"""Every long call releases the GIL: two threads each simulating a user
take about one thread's wall time (the issue's bound is 1.2x, measured on a
quiet machine by crates/py/bench/gil.py; here, on a shared CI machine, the
test asserts < 1.6x: a held GIL would give 2x). Ctrl-C raises
KeyboardInterrupt."""
import _thread
import os
import statistics
import threading
import time

import pytest

import appflow_sim as af

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")


def _one(trace, dev):
    af.simulate(trace, dev, "appflow", threads=1)


def test_two_threads_take_about_one_threads_time():
    trace = af.generate_trace(users=1, days=6, seed=2, population="heavy")
    dev = af.Device.preset("pixel8-8gb")
    _one(trace, dev)  # warm
    ratios = []
    for _ in range(3):
        t0 = time.perf_counter()
        _one(trace, dev)
        one = time.perf_counter() - t0
        ts = [threading.Thread(target=_one, args=(trace, dev)) for _ in range(2)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ratios.append((time.perf_counter() - t0) / one)
    assert statistics.median(ratios) < 1.6, ratios


def test_ctrl_c_interrupts_a_long_simulation():
    trace = af.generate_trace(users=64, days=30, seed=1)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        af.simulate(trace, "pixel8-8gb", "appflow", threads=1)
    took = time.perf_counter() - t0
    timer.cancel()
    # It stops after the users in flight, well before the whole batch.
    assert took < 10, took
