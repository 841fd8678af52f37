"""Sweeps over traces × devices × seeds × policies: serially, on threads, or
as Ray Core tasks (docs/python.md "Sweeps").

Every backend cuts the work into the same units (one trace, one device,
one seed, a chunk of consecutive users, every policy) and assembles the
unit tables in the same order, and each user is simulated alone on a fresh
device, so the table is the same whatever the backend, the chunking or the
number of workers (``table_hash`` equal).

Ray (an optional extra: ``pip install appflow-sim[ray]``) follows Ray's own
guidance for task size and data: each task holds at least
``min_task_seconds`` of work (estimated from a timed first user), each
trace goes into the object store once (``ray.put``) and tasks read
zero-copy slices of it, and results are drained with ``ray.wait`` as they
finish. ``ray.init()`` starts a local Ray unless one is running;
``RAY_ADDRESS`` (e.g. ``ray://head:10001`` or ``auto``) joins a cluster.
"""
from __future__ import annotations

import numbers
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Sequence, Union

import pyarrow as pa

from . import Device, PolicyList, Trace, _device, _float_arg, _int_arg, _policy_list, _seed, _str_arg, simulate

BACKENDS = ("serial", "threads", "ray")


@dataclass(frozen=True)
class _Unit:
    trace: int
    device: int
    seed: int
    first_user: int
    end_user: int


def _as_list(name: str, x: Any, one: Union[type, tuple[type, ...]]) -> list[Any]:
    if isinstance(x, one):
        return [x]
    try:
        return list(x)
    except TypeError:
        raise ValueError(f"{name}: expected one or a list, got {type(x).__name__} {x!r}") from None


def _chunks(trace: Trace, users_per_chunk: int) -> list[tuple[int, int]]:
    n = len(trace)
    return [(lo, min(lo + users_per_chunk, n)) for lo in range(0, n, users_per_chunk)]


def _users_per_chunk(trace: Trace, device: Device, policies: str, seed: int, min_task_seconds: float) -> int:
    """Users per task so that a task holds at least ``min_task_seconds`` of
    work: the first user is timed under every policy and the rest scaled by
    their events (the first user's own result is not used)."""
    if len(trace) <= 1 or min_task_seconds <= 0:
        return 1
    per_user = trace.events_per_user
    t0 = time.perf_counter()
    simulate(trace.select([0]), device, policies, seed=seed, threads=1)
    per_event = (time.perf_counter() - t0) / max(per_user[0], 1)
    mean_events = sum(per_user) / len(per_user)
    need = min_task_seconds / max(per_event * mean_events, 1e-9)
    return max(1, min(len(trace), int(need) + 1))


def _with_trace_column(table: pa.Table, trace: int) -> pa.Table:
    return table.add_column(0, "trace", pa.array([trace] * table.num_rows, pa.int32()))


def _run_unit(trace: Trace, device: Device, policies: str, seed: int, lo: int, hi: int) -> pa.Table:
    return simulate(trace.select(range(lo, hi)), device, policies, seed=seed, threads=1).summary


def _ray_unit(
    table: pa.Table, row_lo: int, row_hi: int, source: tuple[str, str], policies: str, seed: int
) -> pa.Table:
    # Runs in a Ray worker: the trace table comes zero-copy from the object store.
    kind, value = source
    device = Device.preset(value) if kind == "preset" else Device.from_toml(value)
    trace = Trace.from_arrow(table.slice(row_lo, row_hi - row_lo))
    return simulate(trace, device, policies, seed=seed, threads=1).summary


def sweep(
    traces: Union[Trace, Sequence[Trace]],
    devices: Union[Device, str, Sequence[Union[Device, str]]],
    policies: PolicyList = ("android", "appflow"),
    seeds: Union[int, Sequence[int]] = (1,),
    backend: str = "serial",
    workers: int = 0,
    min_task_seconds: float = 1.0,
    users_per_task: int = 0,
) -> pa.Table:
    """One per-user × policy table over every trace, device and seed, with
    a ``trace`` column (the trace's position) in front.

    ``backend``: ``"serial"`` (this thread), ``"threads"`` (``workers``
    threads, 0 = one per core; the GIL is released while they simulate) or
    ``"ray"`` (Ray Core tasks). ``users_per_task`` fixes the chunk size;
    0 sizes chunks to at least ``min_task_seconds`` of work each."""
    _str_arg("backend", backend)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
    trace_list: list[Trace] = _as_list("traces", traces, Trace)
    if not trace_list or not all(isinstance(t, Trace) for t in trace_list):
        raise ValueError("traces: expected an appflow_sim.Trace or a non-empty list of them")
    devs = [_device(d, "devices") for d in _as_list("devices", devices, (Device, str))]
    if not devs:
        raise ValueError("devices: expected at least one device")
    seed_list = [_seed("seeds", s) for s in _as_list("seeds", seeds, numbers.Integral)]
    if not seed_list:
        raise ValueError("seeds: expected at least one seed")
    workers = _int_arg("workers", workers, 0, None, " (0: one per core)")
    min_task_seconds = _float_arg("min_task_seconds", min_task_seconds, 0.0)
    users_per_task = _int_arg("users_per_task", users_per_task, 0, None, " (0: sized by min_task_seconds)")
    pols = _policy_list(policies)
    # Validate names once, here, before any worker starts (ValueError).
    simulate(trace_list[0].select([0]), devs[0], pols, seed=seed_list[0], threads=1)

    units: list[_Unit] = []
    for ti, tr in enumerate(trace_list):
        if users_per_task > 0:
            per = users_per_task
        elif backend == "serial":
            per = len(tr)
        else:
            per = _users_per_chunk(tr, devs[0], pols, seed_list[0], min_task_seconds)
        for di in range(len(devs)):
            for seed in seed_list:
                for lo, hi in _chunks(tr, per):
                    units.append(_Unit(ti, di, seed, lo, hi))

    if backend == "serial":
        tables = [
            _run_unit(trace_list[u.trace], devs[u.device], pols, u.seed, u.first_user, u.end_user) for u in units
        ]
    elif backend == "threads":
        n = workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = [
                pool.submit(_run_unit, trace_list[u.trace], devs[u.device], pols, u.seed, u.first_user, u.end_user)
                for u in units
            ]
            tables = [f.result() for f in futures]
    else:
        tables = _sweep_ray(trace_list, devs, pols, units)
    return pa.concat_tables([_with_trace_column(t, u.trace) for t, u in zip(tables, units)])


def _sweep_ray(traces: list[Trace], devs: list[Device], pols: str, units: list[_Unit]) -> list[pa.Table]:
    try:
        import ray
    except ImportError:
        raise ValueError(
            "backend 'ray' needs Ray: pip install 'appflow-sim[ray]' (or pip install ray)"
        ) from None
    if not ray.is_initialized():
        # RAY_ADDRESS joins a cluster; without it Ray starts locally.
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False)
    task = ray.remote(num_cpus=1)(_ray_unit)
    # Each trace into the object store once; tasks slice it (zero-copy).
    refs = [ray.put(t.to_arrow()) for t in traces]
    starts = [[0, *accumulate(t.events_per_user)] for t in traces]
    pending: dict[Any, int] = {}
    for i, u in enumerate(units):
        s = starts[u.trace]
        ref = task.remote(
            refs[u.trace], s[u.first_user], s[u.end_user], devs[u.device].source, pols, u.seed
        )
        pending[ref] = i
    out: list[pa.Table] = [None] * len(units)
    waiting = list(pending)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        for r in ready:
            out[pending[r]] = ray.get(r)
    return out
