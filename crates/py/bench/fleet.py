"""The fleet run of issue 27: 1,000 generated users x 30 days x 4 policies x
2 devices on Ray, against the same sweep serially.

    scripts/result fleet/ray-1000x30 -- target/py-venv/bin/python crates/py/bench/fleet.py

Prints JSON: wall times (Ray, serial), speed-up, simulated user-days per
second per core, the tables' hashes (must be equal), and per device and
policy the median and worst user of kills and GB-scale cold relaunches.
Environment: USERS, DAYS (defaults 1000, 30), POLICIES (comma-separated;
default the four above), SERIAL=0 skips the serial run, TABLE=FILE.csv
writes the per-user table.
"""
import json
import os
import statistics
import time

import pyarrow as pa
import pyarrow.compute as pc
import ray

import appflow_sim as af

USERS = int(os.environ.get("USERS", "1000"))
DAYS = int(os.environ.get("DAYS", "30"))
DEVICES = ["pixel8-8gb", "pixel7-6gb"]
POLICIES = os.environ.get("POLICIES", "android,paralfetch,acclaim+paralfetch,appflow").split(",")


def per_policy(t: pa.Table) -> dict:
    out = {}
    for dev in DEVICES:
        for pol in POLICIES:
            sub = t.filter(pc.and_(pc.equal(t["device"], dev), pc.equal(t["policy"], pol)))
            row = {}
            for col in ("kills", "gb_scale_cold_relaunches", "cold_relaunches", "cold_mean_ms"):
                v = sub[col].to_pylist()
                row[col] = {"median": statistics.median(v), "worst": max(v)}
            out[f"{dev}/{pol}"] = row
    return out


def main():
    t0 = time.perf_counter()
    trace = af.generate_trace(users=USERS, days=DAYS, seed=1, population="mixed")
    gen_s = time.perf_counter() - t0
    ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=False)
    cores = int(ray.cluster_resources().get("CPU", 1))
    t0 = time.perf_counter()
    t_ray = af.sweep(trace, DEVICES, POLICIES, seeds=[1], backend="ray")
    ray_s = time.perf_counter() - t0
    ray.shutdown()
    user_days = USERS * DAYS * len(DEVICES) * len(POLICIES)
    out = {
        "trace": f"generate_trace(users={USERS}, days={DAYS}, seed=1, population='mixed')",
        "events": trace.num_events,
        "generate_s": round(gen_s, 2),
        "devices": DEVICES,
        "policies": POLICIES,
        "rows": t_ray.num_rows,
        "ray_cores": cores,
        "ray_wall_s": round(ray_s, 1),
        "simulated_user_days": user_days,
        "ray_user_days_per_s_per_core": round(user_days / ray_s / cores, 1),
        "ray_hash": af.table_hash(t_ray),
        "per_device_policy": per_policy(t_ray),
    }
    if os.environ.get("SERIAL", "1") != "0":
        t0 = time.perf_counter()
        t_ser = af.sweep(trace, DEVICES, POLICIES, seeds=[1], backend="serial")
        ser_s = time.perf_counter() - t0
        out.update({
            "serial_wall_s": round(ser_s, 1),
            "serial_user_days_per_s": round(user_days / ser_s, 1),
            "speedup_ray_over_serial": round(ser_s / ray_s, 2),
            "serial_hash": af.table_hash(t_ser),
            "identical": af.table_hash(t_ser) == out["ray_hash"],
        })
    out["loadavg_end"] = os.getloadavg()
    if os.environ.get("TABLE"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(t_ray, os.environ["TABLE"])
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
