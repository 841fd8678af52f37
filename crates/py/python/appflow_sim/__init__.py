"""appflow_sim: the appflow phone simulator from Python (docs/python.md).

The simulation runs in Rust (``appflow_sim._native``) with the GIL released;
results come back as pyarrow Tables through the Arrow C stream interface,
so pandas (``table.to_pandas()``) and polars (``pl.from_arrow(table)``)
take them without a copy through Python objects.

    >>> import appflow_sim as af
    >>> trace = af.generate_trace(users=8, days=7, seed=1)
    >>> res = af.simulate(trace, af.Device.preset("pixel8-8gb"), policies=["android", "appflow"])
    >>> res.summary.num_rows
    16

Bad input (an unknown device, policy or app, a malformed trace, an
argument out of its range) raises ``ValueError`` naming what was wrong and
what is allowed, with the message the ``appflow`` CLI prints where the CLI
has one; a generated trace too large for this process's memory raises
``MemoryError`` before it is generated.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import numbers
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

import pyarrow as pa

from . import _native
from ._native import Device

__all__ = [
    "Device",
    "Trace",
    "Result",
    "devices",
    "policies",
    "catalogue",
    "generate_trace",
    "simulate",
    "run_scenario",
    "sweep",
    "table_hash",
]

PolicyList = Union[str, Sequence[str]]
PathLike = Union[str, "os.PathLike[str]"]

if TYPE_CHECKING:
    from .convert import Coverage

#: Largest seed (the simulator's seeds are u64).
MAX_SEED = 2**64 - 1
#: Most users and days of a generated trace (the CLI's ``--users`` / ``--days``).
MAX_USERS: int = _native.MAX_USERS
MAX_DAYS: int = _native.MAX_DAYS


def _int_arg(name: str, value: object, lo: int, hi: Optional[int] = None, hint: str = "") -> int:
    """``value`` as an int in ``lo..hi``, else ValueError naming ``name``
    and the range (a float, NaN, bool or a negative number included)."""
    rng = f"from {lo} to {hi}" if hi is not None else f"{lo} or more"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer {rng}{hint}, got {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"{name}: expected an integer {rng}{hint}, got {v}")
    return v


def _float_arg(name: str, value: object, lo: float) -> float:
    """``value`` as a finite float of at least ``lo``, else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name}: expected a finite number {lo:g} or more, got {value!r}")
    v = float(value)
    if v < lo:
        raise ValueError(f"{name}: expected a finite number {lo:g} or more, got {v!r}")
    return v


def _str_arg(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {type(value).__name__} {value!r}")
    return value


def _bool_arg(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return value


def _path_arg(name: str, value: object) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}: expected a path (str or os.PathLike), got {type(value).__name__}")
    return str(os.fspath(value))


def _seed(name: str, value: object) -> int:
    return _int_arg(name, value, 0, MAX_SEED)


def _threads(name: str, value: object) -> int:
    return _int_arg(name, value, 0, 4096, " (0: one per core)")

#: Columns of a trace table (docs/sim.md "Trace format").
TRACE_COLUMNS = ("user", "timestamp", "app", "event")


def devices() -> list[str]:
    """Device preset names (``Device.preset(name)``)."""
    return _native.devices()


def policies() -> list[str]:
    """Canonical names of the registered policies."""
    return _native.policies()


def catalogue() -> pa.Table:
    """The built-in app catalogue: name, class (gb/low/tail), anon_mib, file_mib, small_files."""
    return pa.table(_native.catalogue())


class Trace:
    """An app-usage trace: users, each with its events in time order.

    Make one with :meth:`from_csv`, :meth:`from_arrow`, :meth:`from_pandas`,
    :func:`generate_trace`, or a converter of :mod:`appflow_sim.convert`.
    """

    __slots__ = ("_t", "_coverage")

    def __init__(self, native: "_native.Trace", coverage: "Optional[Coverage]" = None) -> None:
        self._t = native
        self._coverage = coverage

    @property
    def coverage(self) -> "Optional[Coverage]":
        """What a converter of :mod:`appflow_sim.convert` made of its source
        (rows in, mapped, stand-ins, dropped, users); None for other traces."""
        return self._coverage

    @staticmethod
    def from_csv(path: PathLike) -> "Trace":
        """Reads a CSV/TSV trace (user,timestamp,app,event); errors give file:line."""
        return Trace(_native.Trace.from_csv(_path_arg("path", path)))

    @staticmethod
    def from_arrow(data: Any, source: str = "arrow") -> "Trace":
        """Reads an Arrow table (or anything with ``__arrow_c_stream__``) with
        columns user, timestamp (int, Unix ms), app, event. Columns are cast
        to utf8 / int64 first; errors give the row (1-based)."""
        _str_arg("source", source)
        try:
            table = data if isinstance(data, pa.Table) else pa.table(data)
        except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(f"{source}: not a table with columns {', '.join(TRACE_COLUMNS)}: {e}") from None
        missing = [c for c in TRACE_COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(
                f"{source}: no column {missing[0]!r}; a trace has columns "
                f"{', '.join(TRACE_COLUMNS)} (docs/sim.md), found {', '.join(table.column_names)}"
            )
        types = {"user": pa.string(), "timestamp": pa.int64(), "app": pa.string(), "event": pa.string()}
        cols = []
        for name in TRACE_COLUMNS:
            try:
                cols.append(table.column(name).cast(types[name]))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ValueError(f"{source}: column {name!r} is not {types[name]}: {e}") from None
        table = pa.table(cols, names=list(TRACE_COLUMNS))
        return Trace(_native.Trace._from_arrow_stream(table, source))

    @staticmethod
    def from_pandas(df: Any, source: str = "pandas") -> "Trace":
        """Reads a pandas DataFrame with columns user, timestamp, app, event."""
        return Trace.from_arrow(pa.Table.from_pandas(df, preserve_index=False), source)

    def to_arrow(self) -> pa.Table:
        """The trace as a table (user, timestamp, app, event), each user's rows contiguous."""
        return pa.table(self._t._to_arrow_stream())

    @property
    def users(self) -> list[str]:
        """User ids in order of first appearance."""
        return self._t.users

    @property
    def events_per_user(self) -> list[int]:
        """Events of each user, in user order."""
        return self._t.events_per_user

    @property
    def num_events(self) -> int:
        """Events in all."""
        return self._t.num_events

    def select(self, positions: Iterable[int]) -> "Trace":
        """The users at these positions (0 to ``len(trace) - 1``)."""
        n = len(self._t)
        try:
            items = list(positions)
        except TypeError:
            raise ValueError(f"positions: expected an iterable of integers, got {type(positions).__name__}") from None
        if n == 0:
            raise ValueError("positions: the trace has no users")
        pos = [_int_arg("positions", p, 0, n - 1, f" (a user's position; the trace has {n} users)") for p in items]
        return Trace(self._t.select(pos))

    def __len__(self) -> int:
        return len(self._t)

    def __repr__(self) -> str:
        return repr(self._t)

    def __reduce__(self) -> "tuple[Any, tuple[Any, ...]]":  # pickling (threads/Ray): through Arrow
        return (Trace.from_arrow, (self.to_arrow(),))


def _memory_budget() -> Optional[int]:
    """Bytes this process may still allocate: the least of the memory
    available (``MemAvailable``), what the cgroup's ``memory.max`` leaves and
    what the address-space limit (``ulimit -v``) leaves, less 256 MiB for
    the interpreter and threads; None where none of them can be read."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if cap != "max":
            limits.append(int(cap) - used)
    except (OSError, ValueError):
        pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            size = 0
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmSize:"):
                        size = int(line.split()[1]) * 1024
            limits.append(soft - size)
    except (ImportError, OSError, ValueError):
        pass
    if not limits:
        return None
    return max(0, min(limits) - (256 << 20))


def generate_trace(
    users: int = 1,
    days: int = 30,
    apps: int = 60,
    seed: int = 1,
    population: str = "mixed",
    max_bytes: Optional[int] = None,
) -> Trace:
    """A generated trace of ``users`` users (1 to ``MAX_USERS``) over
    ``days`` days (1 to ``MAX_DAYS``) from a population (docs/sim.md "A
    user population"): ``mixed``, ``uniform``, a type name, or
    ``type=weight,...``. The generator of ``appflow sim --generate-trace``.

    The trace is held in memory, about 300 bytes an event while it is made
    (a ``mixed`` user makes about 100 events a day). A request whose
    estimate exceeds ``max_bytes`` (default: what this process may still
    allocate, see docs/python.md "Memory") raises ``MemoryError`` before
    anything is generated."""
    users = _int_arg("users", users, 1, MAX_USERS)
    days = _int_arg("days", days, 1, MAX_DAYS)
    apps = _int_arg("apps", apps, *_native.APPS_RANGE, " (apps of the catalogue used)")
    seed = _seed("seed", seed)
    population = _str_arg("population", population)
    if max_bytes is None:
        budget = _memory_budget()
    else:
        budget = _int_arg("max_bytes", max_bytes, 0, 2**64 - 1)
    return Trace(_native.generate_trace(users, days, apps, seed, population, budget))


@dataclass(frozen=True)
class Result:
    """What :func:`simulate` returns."""

    #: One row per user × policy (user-major, policies in the order asked).
    summary: pa.Table
    #: One row per launch, when asked for with ``launches=True``.
    launches: Optional[pa.Table]


def _policy_list(policies: PolicyList) -> str:
    if isinstance(policies, str):
        return policies
    try:
        names: list[object] = list(policies)
    except TypeError:
        names = [policies]
    if not names or not all(isinstance(p, str) for p in names):
        raise ValueError(
            f"policies: expected a policy name, a comma-separated list or a list of names "
            f"(policies() lists them), got {policies!r}"
        )
    return ",".join(str(n) for n in names)


def _device(device: object, name: str = "device") -> Device:
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        return Device.preset(device)
    raise ValueError(f"{name}: expected a Device or a preset name (devices() lists them), got {device!r}")


def simulate(
    trace: Trace,
    device: Union[Device, str],
    policies: PolicyList = ("android", "appflow"),
    seed: int = 1,
    threads: int = 0,
    launches: bool = False,
) -> Result:
    """Simulates every user of ``trace`` on ``device`` under each policy, each
    user on a fresh device. ``threads=0`` uses every core. Releases the GIL;
    Ctrl-C raises KeyboardInterrupt."""
    if not isinstance(trace, Trace):
        raise ValueError(f"trace: expected an appflow_sim.Trace, got {type(trace).__name__}")
    dev = _device(device)
    pols = _policy_list(policies)
    seed = _seed("seed", seed)
    threads = _threads("threads", threads)
    launches = _bool_arg("launches", launches)
    s, per_launch = _native.simulate(trace._t, dev, pols, seed, threads, launches)
    return Result(pa.table(s), pa.table(per_launch) if per_launch is not None else None)


def run_scenario(
    device: Union[Device, str],
    workload: str = "high",
    policies: PolicyList = ("android", "appflow"),
    seed: int = 1,
    targets: Optional[Sequence[str]] = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Runs one of the CLI's workloads (none, low, medium, high, multitask)
    and returns its RunReport (``appflow sim --format json``) as a dict."""
    dev = _device(device)
    workload = _str_arg("workload", workload)
    pols = _policy_list(policies)
    seed = _seed("seed", seed)
    threads = _threads("threads", threads)
    if targets is not None:
        if isinstance(targets, str) or not all(isinstance(t, str) for t in targets):
            raise ValueError(f"targets: expected a list of app names, got {targets!r}")
    text = _native.run_scenario(dev, workload, pols, seed, list(targets) if targets else None, threads)
    report: dict[str, Any] = json.loads(text)
    return report


def table_hash(table: pa.Table) -> str:
    """SHA-256 of a table's CSV rendering: equal tables, equal hash, however chunked."""
    import pyarrow.csv as pacsv

    buf = io.BytesIO()
    pacsv.write_csv(table.combine_chunks(), buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


from .sweep import sweep  # noqa: E402  (uses the names above)
