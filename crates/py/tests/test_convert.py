"""Trace converters on tiny fixtures in each source's own format."""
import os

import pytest

import appflow_sim as af
from appflow_sim import convert

DATA = os.path.join(os.path.dirname(__file__), "data")


def rows(trace):
    return [(r["user"], r["timestamp"], r["app"], r["event"]) for r in trace.to_arrow().to_pylist()]


def test_lsapp():
    tr = convert.lsapp(os.path.join(DATA, "lsapp_tiny.tsv"))
    r = rows(tr)
    assert tr.users == ["0", "291"]
    # User Interaction rows dropped; Opened/Closed kept in file order.
    assert len(r) == 16
    ts0 = 1516082465000  # 2018-01-16 06:01:05 UTC
    assert r[0][1] == ts0 and r[0][3] == "open" and r[1][3] == "close"
    apps = [a for _, _, a, _ in r]
    assert "PUBG" in apps and "Instagram" in apps and "TikTok" in apps and "Facebook" in apps
    # Minesweeper and "Google" have no counterpart: stable tail stand-ins, never GB-scale.
    cat = af.catalogue().to_pylist()
    tail = {c["name"] for c in cat if c["class"] == "tail"}
    assert r[0][2] in tail and r[2][2] == r[0][2]
    # Simulates.
    assert af.simulate(tr, "pixel8-8gb", "android").summary.num_rows == 2
    dropped = convert.lsapp(os.path.join(DATA, "lsapp_tiny.tsv"), unmapped="drop")
    assert len(rows(dropped)) == 10
    with pytest.raises(ValueError, match="no counterpart.*Minesweeper"):
        convert.lsapp(os.path.join(DATA, "lsapp_tiny.tsv"), unmapped="error")
    mine = convert.lsapp(
        os.path.join(DATA, "lsapp_tiny.tsv"), app_map={"Minesweeper Classic (Mines)": "Roblox"}
    )
    assert rows(mine)[0][2] == "Roblox"


def test_studentlife():
    tr = convert.studentlife(os.path.join(DATA, "running_app_u00.csv"))
    r = rows(tr)
    assert tr.users == ["u00"]
    assert [(a, e) for _, _, a, e in r] == [
        ("Gmail", "open"),
        ("Facebook", "open"),
        ("Facebook", "close"),
        (r[3][2], "open"),  # the StudentLife app itself: a tail stand-in
        ("Chrome", "open"),
    ]
    assert r[0][1] == 1364100683000
    # A directory of running_app files.
    assert convert.studentlife(DATA).users == ["u00"]


def test_generic_csv():
    tr = convert.generic_csv(
        os.path.join(DATA, "generic.csv"), user="person", timestamp="time_s", app="application",
        event="action", time_unit="s",
    )
    r = rows(tr)
    assert tr.users == ["alice", "bob"]
    assert r[0] == ("alice", 1704096000000, "YouTube", "open")
    assert ("alice", 1704096900000, "Roblox", "close") in r
    assert len(r) == 6  # the notification row is neither open nor close
    with pytest.raises(ValueError, match="time_unit"):
        convert.generic_csv(os.path.join(DATA, "generic.csv"), user="person", timestamp="time_s",
                            app="application", time_unit="days")
