"""GIL released: two Python threads each simulating a user, against one
thread simulating one (issue 27: <= 1.2x).

    scripts/result py/gil -- target/py-venv/bin/python crates/py/bench/gil.py

Each simulation: one generated heavy user, 20 days, appflow, pixel8-8gb,
threads=1. Interleaved REPS times (one thread, then two); prints JSON with
the walls, the per-pair ratios and their median.
"""
import json
import os
import statistics
import threading
import time

import appflow_sim as af

REPS = int(os.environ.get("REPS", "7"))


def main():
    trace = af.generate_trace(users=1, days=20, seed=2, population="heavy")
    dev = af.Device.preset("pixel8-8gb")

    def one():
        af.simulate(trace, dev, "appflow", threads=1)

    one()
    singles, doubles, ratios = [], [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        one()
        s = time.perf_counter() - t0
        ts = [threading.Thread(target=one) for _ in range(2)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        d = time.perf_counter() - t0
        singles.append(round(s, 3))
        doubles.append(round(d, 3))
        ratios.append(round(d / s, 3))
    print(json.dumps({
        "work": "1 heavy user x 20 days, appflow, pixel8-8gb, threads=1 per call",
        "cpus": os.cpu_count(),
        "one_thread_wall_s": singles,
        "two_threads_wall_s": doubles,
        "ratio_two_over_one": ratios,
        "ratio_median": statistics.median(ratios),
        "loadavg_end": os.getloadavg(),
    }, indent=1))


if __name__ == "__main__":
    main()
