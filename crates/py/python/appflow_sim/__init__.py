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

Bad input (an unknown device, policy or app, a malformed trace) raises
``ValueError`` with the message the ``appflow`` CLI prints.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence, Union

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

    __slots__ = ("_t",)

    def __init__(self, native: "_native.Trace") -> None:
        self._t = native

    @staticmethod
    def from_csv(path: Union[str, os.PathLike]) -> "Trace":
        """Reads a CSV/TSV trace (user,timestamp,app,event); errors give file:line."""
        return Trace(_native.Trace.from_csv(os.fspath(path)))

    @staticmethod
    def from_arrow(data: Any, source: str = "arrow") -> "Trace":
        """Reads an Arrow table (or anything with ``__arrow_c_stream__``) with
        columns user, timestamp (int, Unix ms), app, event. Columns are cast
        to utf8 / int64 first; errors give the row (1-based)."""
        table = data if isinstance(data, pa.Table) else pa.table(data)
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
        """The users at these positions."""
        return Trace(self._t.select(list(positions)))

    def __len__(self) -> int:
        return len(self._t)

    def __repr__(self) -> str:
        return repr(self._t)

    def __reduce__(self):  # pickling (threads/Ray): through Arrow
        return (Trace.from_arrow, (self.to_arrow(),))


def generate_trace(
    users: int = 1, days: int = 30, apps: int = 60, seed: int = 1, population: str = "mixed"
) -> Trace:
    """A generated trace of ``users`` users from a population (docs/sim.md
    "A user population"): ``mixed``, ``uniform``, a type name, or
    ``type=weight,...``. The generator of ``appflow sim --generate-trace``."""
    return Trace(_native.generate_trace(users, days, apps, seed, population))


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
    return ",".join(policies)


def _device(device: Union[Device, str]) -> Device:
    return device if isinstance(device, Device) else Device.preset(device)


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
    s, l = _native.simulate(trace._t, _device(device), _policy_list(policies), seed, threads, launches)
    return Result(pa.table(s), pa.table(l) if l is not None else None)


def run_scenario(
    device: Union[Device, str],
    workload: str = "high",
    policies: PolicyList = ("android", "appflow"),
    seed: int = 1,
    targets: Optional[Sequence[str]] = None,
    threads: int = 0,
) -> dict:
    """Runs one of the CLI's workloads (none, low, medium, high, multitask)
    and returns its RunReport (``appflow sim --format json``) as a dict."""
    text = _native.run_scenario(
        _device(device), workload, _policy_list(policies), seed, list(targets) if targets else None, threads
    )
    return json.loads(text)


def table_hash(table: pa.Table) -> str:
    """SHA-256 of a table's CSV rendering: equal tables, equal hash, however chunked."""
    import pyarrow.csv as pacsv

    buf = io.BytesIO()
    pacsv.write_csv(table.combine_chunks(), buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


from .sweep import sweep  # noqa: E402  (uses the names above)
