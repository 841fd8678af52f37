"""Bad input raises one clear ValueError, with the CLI's own message, and
leaves nothing half-done (issue: "Bad input")."""
import os

import pyarrow as pa
import pytest

import appflow_sim as af
from appflow_sim import convert

DATA = os.path.join(os.path.dirname(__file__), "data")


def test_unknown_device_lists_the_presets():
    with pytest.raises(ValueError, match=r"unknown device .*pixel8-8gb"):
        af.Device.preset("pixel99")
    with pytest.raises(ValueError, match="pixel7-6gb"):
        af.simulate(af.generate_trace(days=1), "pixel99", "android")


def test_unknown_policy_lists_the_policies():
    tr = af.generate_trace(days=1)
    with pytest.raises(ValueError, match=r"(?s)unknown policy.*appflow"):
        af.simulate(tr, "pixel8-8gb", ["android", "nope"])
    with pytest.raises(ValueError, match="unknown policy"):
        af.sweep(tr, ["pixel8-8gb"], ["nope"], backend="threads")


def test_malformed_trace_names_file_and_line():
    path = os.path.join(DATA, "bad_line.csv")
    with pytest.raises(ValueError, match=r"bad_line\.csv:3: timestamp \"not-a-time\""):
        af.Trace.from_csv(path)
    with pytest.raises(ValueError, match="cannot read"):
        af.Trace.from_csv(os.path.join(DATA, "missing.csv"))


def test_malformed_arrow_trace_names_the_row():
    t = pa.table({"user": ["a", "a"], "timestamp": [5, 4], "app": ["TikTok", "TikTok"], "event": ["open", "close"]})
    with pytest.raises(ValueError, match=r"row 2: timestamp 4 goes back in time"):
        af.Trace.from_arrow(t)
    t = pa.table({"user": ["a"], "timestamp": [5], "app": ["Nope"], "event": ["open"]})
    with pytest.raises(ValueError, match=r"row 1: unknown app \"Nope\"; valid apps: .*TikTok"):
        af.Trace.from_arrow(t)
    with pytest.raises(ValueError, match="no column 'event'"):
        af.Trace.from_arrow(pa.table({"user": ["a"], "timestamp": [1], "app": ["TikTok"]}))
    with pytest.raises(ValueError, match="timestamp"):
        af.Trace.from_arrow(pa.table({"user": ["a"], "timestamp": ["x"], "app": ["TikTok"], "event": ["open"]}))


def test_wrong_source_format_is_named():
    lsapp = os.path.join(DATA, "lsapp_tiny.tsv")
    sl = os.path.join(DATA, "running_app_u00.csv")
    with pytest.raises(ValueError, match=r"not a StudentLife running_app file: no column 'timestamp'"):
        convert.studentlife(lsapp)
    with pytest.raises(ValueError, match=r"not an LSApp TSV: no column 'user_id'"):
        convert.lsapp(sl)
    with pytest.raises(ValueError, match="no column 'person'"):
        convert.generic_csv(lsapp, user="person", timestamp="time_s", app="application")


def test_bad_population_and_generator_bounds():
    with pytest.raises(ValueError, match=r"--population: unknown population \"crowd\".*gb-heavy"):
        af.generate_trace(users=2, population="crowd")
    with pytest.raises(ValueError, match="days: expected an integer from 1 to 100, got 0"):
        af.generate_trace(days=0)
    with pytest.raises(ValueError, match="users: expected an integer from 1 to 100000, got 0"):
        af.generate_trace(users=0)


def test_bad_sweep_arguments():
    tr = af.generate_trace(days=1)
    with pytest.raises(ValueError, match="unknown backend 'mpi'"):
        af.sweep(tr, "pixel8-8gb", "android", backend="mpi")
    with pytest.raises(ValueError, match="traces"):
        af.sweep([], "pixel8-8gb", "android")
    with pytest.raises(ValueError, match="unknown workload"):
        af.run_scenario("pixel8-8gb", "siege")


def test_a_device_file_error_names_the_file(tmp_path):
    p = tmp_path / "dev.toml"
    p.write_text("[device]\nname = 'x'\ndram_mib = 'lots'\n")
    with pytest.raises(ValueError, match="dev.toml"):
        af.Device.from_toml(p)
