"""sweep(): serial, threads, Ray on one node and a 2-node Ray cluster on
this machine give the same table (same hash)."""
import os

import pytest

import appflow_sim as af

try:
    import ray
except ImportError as e:  # Ray is an optional extra
    ray = None
    RAY_MISSING = f"Ray is not installed ({e}); pip install 'appflow-sim[ray]'"

needs_ray = pytest.mark.skipif(ray is None, reason=RAY_MISSING if ray is None else "")

POLICIES = ["android", "appflow"]
DEVICES = ["pixel8-8gb", "pixel7-6gb"]


@pytest.fixture(scope="module")
def traces():
    return [
        af.generate_trace(users=6, days=2, seed=11, population="mixed"),
        af.generate_trace(users=3, days=2, seed=12, population="gb-heavy"),
    ]


@pytest.fixture(scope="module")
def serial(traces):
    return af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="serial")


def test_serial_table_shape(serial, traces):
    assert serial.num_rows == (6 + 3) * len(DEVICES) * 2 * len(POLICIES)
    assert serial.column_names[:4] == ["trace", "user", "device", "policy"]
    assert set(serial.column("device").to_pylist()) == set(DEVICES)


def test_threads_and_chunks_give_the_same_table(serial, traces):
    h = af.table_hash(serial)
    assert af.table_hash(af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="threads")) == h
    assert af.table_hash(
        af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="threads", workers=2, users_per_task=1)
    ) == h
    assert af.table_hash(
        af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="serial", users_per_task=4)
    ) == h


@needs_ray
def test_ray_one_node_gives_the_same_table(serial, traces):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t = af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="ray", users_per_task=2)
        assert af.table_hash(t) == af.table_hash(serial)
    finally:
        ray.shutdown()


@needs_ray
def test_ray_two_node_cluster_gives_the_same_table(serial, traces):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        t = af.sweep(traces, DEVICES, POLICIES, seeds=[1, 2], backend="ray", users_per_task=1)
        assert af.table_hash(t) == af.table_hash(serial)
    finally:
        ray.shutdown()
        cluster.shutdown()
