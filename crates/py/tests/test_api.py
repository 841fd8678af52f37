"""The package's API: names, traces, simulate, result tables (docs/python.md)."""
import os
import subprocess

import pyarrow as pa
import pytest

import appflow_sim as af

DATA = os.path.join(os.path.dirname(__file__), "data")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_names_and_catalogue():
    assert "pixel8-8gb" in af.devices()
    assert {"stock", "appflow"} <= set(af.policies())
    cat = af.catalogue()
    assert cat.num_rows == 68
    assert cat.filter(pa.compute.equal(cat["class"], "gb")).num_rows == 8
    d = af.Device.preset("pixel7-6gb")
    assert d.name == "pixel7-6gb" and d.dram_bytes > 5 * 2**30


def test_generated_trace_is_deterministic_and_typed(small_trace):
    again = af.generate_trace(users=12, days=3, seed=5, population="uniform")
    assert af.table_hash(small_trace.to_arrow()) == af.table_hash(again.to_arrow())
    assert len(small_trace) == 12
    kinds = {u.split("-", 1)[1] for u in small_trace.users}
    assert len(kinds) >= 3
    t = small_trace.to_arrow()
    assert t.column_names == ["user", "timestamp", "app", "event"]
    assert t.num_rows == small_trace.num_events == sum(small_trace.events_per_user)
    # Round trips: Arrow, pandas.
    assert af.table_hash(af.Trace.from_arrow(t).to_arrow()) == af.table_hash(t)
    assert af.table_hash(af.Trace.from_pandas(t.to_pandas()).to_arrow()) == af.table_hash(t)


def test_simulate_one_row_per_user_and_policy(small_trace):
    res = af.simulate(small_trace, "pixel8-6gb", ["android", "appflow"], seed=1, launches=True)
    s = res.summary
    assert s.num_rows == 24
    assert s.column("user").to_pylist()[:2] == [small_trace.users[0]] * 2
    assert s.column("policy").to_pylist()[:2] == ["android", "appflow"]
    for col in ("kills", "cold_relaunches", "gb_scale_cold_relaunches", "amr_mode_switches", "cold_p90_ms"):
        assert col in s.column_names
    total = sum(s.column("launches").to_pylist())
    assert res.launches.num_rows == total
    assert set(res.launches.column("kind").to_pylist()) <= {"cold", "warm", "hot"}
    # Threads do not change the table.
    again = af.simulate(small_trace, "pixel8-6gb", "android,appflow", seed=1, threads=1)
    assert af.table_hash(again.summary) == af.table_hash(s)
    assert again.launches is None


def test_results_go_to_pandas_and_polars_without_python_objects(small_trace):
    s = af.simulate(small_trace.select([0, 1]), "pixel8-8gb", "android").summary
    df = s.to_pandas()
    assert list(df.columns) == s.column_names and len(df) == 2
    pl = pytest.importorskip("polars", reason="polars is not installed")
    p = pl.from_arrow(s)
    assert p.shape == (2, s.num_columns)
    # The native stream itself is an Arrow PyCapsule stream.
    from appflow_sim import _native

    tr = af.generate_trace(users=1, days=1, seed=1)
    stream, _ = _native.simulate(tr._t, af.Device.preset("pixel8-8gb"), "android", 1, 1, False)
    assert pa.table(stream).num_rows == 1


def test_a_one_user_row_is_the_cli_summary(tmp_path):
    """The per-user row of a one-user trace equals the CLI's summary."""
    exes = [os.path.join(REPO, "target", p, "appflow") for p in ("release", "debug")]
    exe = next((e for e in exes if os.path.exists(e)), None)
    if exe is None:
        pytest.skip("the appflow binary is not built (cargo build)")
    tr = af.generate_trace(users=1, days=2, seed=3)
    csv = tmp_path / "one.csv"
    rows = tr.to_arrow().to_pylist()
    csv.write_text("user,timestamp,app,event\n" + "".join(
        f"{r['user']},{r['timestamp']},{r['app']},{r['event']}\n" for r in rows))
    out = subprocess.run(
        [exe, "sim", "--device", "pixel8-8gb", "--workload", "trace", "--trace", str(csv),
         "--policy", "android,appflow", "--format", "json"],
        check=True, capture_output=True, text=True,
    ).stdout
    import json

    rep = json.loads(out)
    s = af.simulate(af.Trace.from_csv(csv), "pixel8-8gb", "android,appflow").summary.to_pylist()
    for row, res in zip(s, rep["results"]):
        assert row["policy"] == res["policy"]
        assert row["launches"] == res["summary"]["launches"]
        assert row["kills"] == res["summary"]["kills"]
        assert row["cold_mean_ms"] == res["summary"]["cold_launch_ms"]["mean"]


def test_run_scenario_is_the_cli_report():
    rep = af.run_scenario("pixel8-6gb", "low", ["android"], targets=["TikTok"])
    assert rep["workload"] == "low" and rep["results"][0]["policy"] == "android"
    assert rep["results"][0]["summary"]["launches"] == 1
