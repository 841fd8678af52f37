"""GIL released: two Python threads each simulating a user, against one
thread simulating one (issue 27: <= 1.2x).

    scripts/result py/gil -- target/py-venv/bin/python crates/py/bench/gil.py

Each simulation: one generated heavy user, 100 days, appflow, pixel8-8gb,
threads=1. Interleaved REPS times (one thread, then two); prints JSON with
the walls, the per-pair ratios and their median. On a machine whose cores
other work keeps busy the wall ratio measures the free cores, not the GIL,
so two load-independent signs are kept too: the process's CPU time over
the two-thread wall (above 1 only if both simulations ran at once, which a
held GIL forbids), and how fast a pure-Python counter thread runs during a
simulation against during a sleep (about 0 with the GIL held), and the
two threads' finish spread, |end1 - end2| over the two calls' whole span
(about 0.5 with the GIL held, the second call waiting for the first;
about 0 when they run at once, however few cores they get).
"""
import json
import os
import statistics
import threading
import time

import appflow_sim as af

REPS = int(os.environ.get("REPS", "15"))


def main():
    trace = af.generate_trace(users=1, days=100, seed=2, population="heavy")
    dev = af.Device.preset("pixel8-8gb")

    def one():
        af.simulate(trace, dev, "appflow", threads=1)

    one()
    singles, doubles, ratios, parallel, spread = [], [], [], [], []

    def timed_one(out):
        t0 = time.perf_counter()
        one()
        out.append((t0, time.perf_counter()))
    for _ in range(REPS):
        t0 = time.perf_counter()
        one()
        s = time.perf_counter() - t0
        spans = []
        ts = [threading.Thread(target=timed_one, args=(spans,)) for _ in range(2)]
        c0 = time.process_time()
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        d = time.perf_counter() - t0
        parallel.append(round((time.process_time() - c0) / d, 3))
        (s0, e0), (s1, e1) = spans
        spread.append(round(abs(e1 - e0) / (max(e0, e1) - min(s0, s1)), 3))
        singles.append(round(s, 3))
        doubles.append(round(d, 3))
        ratios.append(round(d / s, 3))
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    def rate(f):
        count[0] = 0
        stop.clear()
        c = threading.Thread(target=counter)
        c.start()
        t0 = time.perf_counter()
        f()
        took = time.perf_counter() - t0
        stop.set()
        c.join()
        return count[0] / took

    during_sim = rate(one)
    during_sleep = rate(lambda: time.sleep(1.0))
    print(json.dumps({
        "work": "1 heavy user x 100 days, appflow, pixel8-8gb, threads=1 per call",
        "two_threads_finish_spread": spread,
        "two_threads_finish_spread_median": statistics.median(spread),
        "two_threads_cpu_over_wall": parallel,
        "two_threads_cpu_over_wall_median": statistics.median(parallel),
        "python_counter_rate_during_simulation_over_during_sleep": round(during_sim / during_sleep, 3),
        "cpus": os.cpu_count(),
        "one_thread_wall_s": singles,
        "two_threads_wall_s": doubles,
        "ratio_two_over_one": ratios,
        "ratio_median": statistics.median(ratios),
        "loadavg_end": os.getloadavg(),
    }, indent=1))


if __name__ == "__main__":
    main()
