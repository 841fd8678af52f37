"""Python overhead against the CLI on the same 100-day trace (issue 27).

    scripts/result py/overhead -- target/py-venv/bin/python crates/py/bench/overhead.py

Generates the 100-day trace with the CLI (--days 100 --apps 60 --seed 1),
then, interleaved REPS times: the CLI's replay (`appflow sim --workload
trace --policy P --threads 1 --format json`, process wall time) and the
Python call (Trace.from_csv + simulate(threads=1) + the pyarrow table,
wall time in this process). Wall and CPU time (user + system: the CLI
child's rusage, this process's for the call) are both kept; CPU time is
the steadier on a shared machine. Prints JSON: per policy the medians,
spread and the median of the per-pair ratios python/cli - 1.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import appflow_sim as af

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXE = os.path.join(REPO, "target", "release", "appflow")
REPS = int(os.environ.get("REPS", "5"))
POLICIES = sys.argv[1:] or ["appflow", "android"]


def main():
    tmp = tempfile.mkdtemp()
    trace = os.path.join(tmp, "t100.csv")
    subprocess.run([EXE, "sim", "--generate-trace", trace, "--days", "100", "--apps", "60", "--seed", "1"],
                   check=True, capture_output=True)
    dev = af.Device.preset("pixel8-8gb")
    out = {"trace": "appflow sim --generate-trace t100.csv --days 100 --apps 60 --seed 1", "device": dev.name,
           "reps": REPS, "policies": {}}
    for pol in POLICIES:
        cli, py, ratios, same = [], [], [], True
        cli_cpu, py_cpu, cpu_ratios = [], [], []
        for _ in range(REPS):
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            c0 = ru.ru_utime + ru.ru_stime
            t0 = time.perf_counter()
            r = subprocess.run([EXE, "sim", "--device", dev.name, "--workload", "trace", "--trace", trace,
                                "--policy", pol, "--threads", "1", "--format", "json"],
                               check=True, capture_output=True, text=True)
            c = time.perf_counter() - t0
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            cc = ru.ru_utime + ru.ru_stime - c0
            p0 = time.process_time()
            t0 = time.perf_counter()
            res = af.simulate(af.Trace.from_csv(trace), dev, pol, threads=1)
            p = time.perf_counter() - t0
            pc = time.process_time() - p0
            cli_cpu.append(cc)
            py_cpu.append(pc)
            cpu_ratios.append(pc / cc - 1)
            cli.append(c)
            py.append(p)
            ratios.append(p / c - 1)
            s = json.loads(r.stdout)["results"][0]["summary"]
            row = res.summary.to_pylist()[0]
            same &= row["launches"] == s["launches"] and row["kills"] == s["kills"] \
                and row["cold_mean_ms"] == s["cold_launch_ms"]["mean"]
        out["policies"][pol] = {
            "cli_wall_s": [round(x, 3) for x in cli],
            "python_wall_s": [round(x, 3) for x in py],
            "cli_median_s": round(statistics.median(cli), 3),
            "python_median_s": round(statistics.median(py), 3),
            "overhead_median_percent": round(100 * statistics.median(ratios), 2),
            "overhead_min_max_percent": [round(100 * min(ratios), 2), round(100 * max(ratios), 2)],
            "cli_cpu_s": [round(x, 3) for x in cli_cpu],
            "python_cpu_s": [round(x, 3) for x in py_cpu],
            "cpu_overhead_median_percent": round(100 * statistics.median(cpu_ratios), 2),
            "cpu_overhead_min_max_percent": [round(100 * min(cpu_ratios), 2), round(100 * max(cpu_ratios), 2)],
            "same_numbers_as_cli": same,
        }
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
