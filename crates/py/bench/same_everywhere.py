"""The same per-user table on every backend (issue 27): serial, threads,
Ray on one node, and a 2-node Ray cluster on this machine
(ray.cluster_utils.Cluster). Prints JSON with each table's hash.

    scripts/result py/same-everywhere -- target/py-venv/bin/python crates/py/bench/same_everywhere.py
"""
import json
import os
import time

import ray
from ray.cluster_utils import Cluster

import appflow_sim as af

USERS, DAYS = 48, 7
DEVICES = ["pixel8-8gb", "pixel7-6gb"]
POLICIES = ["android", "paralfetch", "acclaim+paralfetch", "appflow"]


def timed(f):
    t0 = time.perf_counter()
    t = f()
    return t, round(time.perf_counter() - t0, 2)


def main():
    trace = af.generate_trace(users=USERS, days=DAYS, seed=1, population="mixed")
    runs = {}

    def run(name, **kw):
        t, s = timed(lambda: af.sweep(trace, DEVICES, POLICIES, seeds=[1], **kw))
        runs[name] = {"hash": af.table_hash(t), "rows": t.num_rows, "wall_s": s}

    run("serial", backend="serial")
    run("threads", backend="threads")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    run("ray_one_node", backend="ray")
    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    nodes = len([n for n in ray.nodes() if n["Alive"]])
    run("ray_two_node_cluster", backend="ray", users_per_task=4)
    runs["ray_two_node_cluster"]["nodes"] = nodes
    ray.shutdown()
    cluster.shutdown()
    hashes = {r["hash"] for r in runs.values()}
    print(json.dumps({
        "trace": f"generate_trace(users={USERS}, days={DAYS}, seed=1, population='mixed')",
        "devices": DEVICES, "policies": POLICIES, "runs": runs,
        "identical": len(hashes) == 1,
    }, indent=1))


if __name__ == "__main__":
    main()
