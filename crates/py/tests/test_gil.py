"""Every long call releases the GIL, and Ctrl-C raises KeyboardInterrupt.

* A pure-Python thread keeps counting while another thread simulates
  (with the GIL held it would stop): this holds on any machine.
* Two threads each simulating a user take about one thread's wall time
  (the issue's bound, 1.2x, is measured by crates/py/bench/gil.py into
  results/py/gil.json). The wall-time ratio only means something when two
  cores are free, so this test skips, saying so, on a busy machine.
"""
import _thread
import os
import signal
import statistics
import threading
import time

import pytest

import appflow_sim as af

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")


def _one(trace, dev):
    af.simulate(trace, dev, "appflow", threads=1)


def test_a_python_thread_runs_while_another_simulates():
    trace = af.generate_trace(users=1, days=6, seed=2, population="heavy")
    dev = af.Device.preset("pixel8-8gb")
    count = [0]
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    def counted(f):
        count[0] = 0
        c = threading.Thread(target=counter)
        c.start()
        t0 = time.perf_counter()
        f()
        took = time.perf_counter() - t0
        stop.set()
        c.join()
        stop.clear()
        return count[0] / took

    during_sim = counted(lambda: _one(trace, dev))
    during_sleep = counted(lambda: time.sleep(0.5))
    # With the GIL held for the whole call the counter would barely move.
    assert during_sim > 0.2 * during_sleep, (during_sim, during_sleep)


def test_two_simulations_on_two_threads_run_at_once():
    """Held GIL: the second call waits for the first, so they finish half
    the span apart; released: together, however few cores they get. Each
    call simulates 3 heavy users over 100 days (about half a second here):
    a call of a few tens of ms let one thread finish a scheduler delay
    ahead of the other on a busy machine, and the spread read as 0.3."""
    trace = af.generate_trace(users=3, days=100, seed=2, population="heavy")
    dev = af.Device.preset("pixel8-8gb")
    _one(trace, dev)
    spreads = []
    for _ in range(5):
        spans = []

        def timed():
            t0 = time.perf_counter()
            _one(trace, dev)
            spans.append((t0, time.perf_counter()))

        ts = [threading.Thread(target=timed) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        (s0, e0), (s1, e1) = spans
        spreads.append(abs(e1 - e0) / (max(e0, e1) - min(s0, s1)))
    assert statistics.median(spreads) < 0.25, spreads


def test_two_threads_take_about_one_threads_time():
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        pytest.skip(f"machine busy (load average {load:.1f} on {os.cpu_count()} cores): "
                    "a wall-time ratio needs two free cores; see results/py/gil.json")
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
    assert statistics.median(ratios) < 1.3, ratios


def test_ctrl_c_interrupts_a_long_simulation():
    trace = af.generate_trace(users=64, days=30, seed=1)
    # Ctrl-C as a terminal delivers it: Python's own SIGINT handler. A
    # process started in the background by a non-interactive shell
    # inherits SIGINT ignored, and then `interrupt_main` does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            af.simulate(trace, "pixel8-8gb", "appflow", threads=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    took = time.perf_counter() - t0
    # It stops after the users in flight, well before the whole batch.
    assert took < 10, took
