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


LSAPP_SHIPPED = os.path.join(DATA, "lsapp.tsv.gz")  # a gzip'd tar holding lsapp.tsv, as LSApp ships it


def test_lsapp_accepts_every_documented_event_type_broken_included():
    """LSApp's README documents Opened, Closed, User Interaction and Broken."""
    assert set(convert.LSAPP_EVENTS) == {"Opened", "Closed", "User Interaction", "Broken"}
    tr = convert.lsapp(LSAPP_SHIPPED, verbose=False)
    r = rows(tr)
    # Broken ends the app's session: a close, at the Broken row's time.
    pubg = [(ts, e) for _, ts, a, e in r if a == "PUBG"]
    assert pubg == [(1516082521000, "open"), (1516083030000, "close")]
    assert ("1", 1516191600000, "TikTok", "close") in r
    # User Interaction rows are dropped: the app is already in front.
    assert len(r) == 14


def test_lsapp_reads_the_shipped_tar_gz_and_reports_coverage(capsys):
    tr = convert.lsapp(LSAPP_SHIPPED)
    cov = tr.coverage
    assert cov is not None
    assert (cov.rows_in, cov.mapped, cov.stand_ins, cov.dropped, cov.users) == (17, 10, 4, 3, 3)
    assert cov.dropped_by == {"User Interaction": 3}
    assert (cov.apps_mapped, cov.apps_stand_in, cov.apps_dropped) == (5, 2, 0)
    assert tr.users == ["0", "1", "2"]
    # Printed (to stderr), one line a reader can check.
    err = capsys.readouterr().err
    assert err.strip() == str(cov)
    assert "17 rows in: 10 mapped to catalogue apps (5 apps), 4 to stand-ins (2 apps), 3 dropped (User Interaction 3); 3 users" in err
    # Dropping the unmapped apps moves their rows to dropped, with the reason.
    cov = convert.lsapp(LSAPP_SHIPPED, unmapped="drop", verbose=False).coverage
    assert (cov.mapped, cov.stand_ins, cov.dropped) == (10, 0, 7)
    assert cov.dropped_by == {"User Interaction": 3, "unmapped app": 4}
    # The plain TSV inside reads the same.
    assert af.table_hash(convert.lsapp(os.path.join(DATA, "lsapp_tiny.tsv"), verbose=False).to_arrow())


def test_a_wrong_file_in_a_tar_names_it_without_binary_noise():
    with pytest.raises(ValueError) as e:
        convert.studentlife(LSAPP_SHIPPED)
    msg = str(e.value)
    # The table inside the archive is read (its header named), not the tar's bytes.
    assert "lsapp.tsv.gz: not a StudentLife running_app file: no column 'timestamp'" in msg
    assert "user_id\\tsession_id" in msg
    assert "\x00" not in msg and "ustar" not in msg


def test_studentlife_and_generic_csv_report_coverage():
    cov = convert.studentlife(os.path.join(DATA, "running_app_u00.csv"), verbose=False).coverage
    assert cov is not None and cov.users == 1
    assert cov.rows_in == cov.mapped + cov.stand_ins + cov.dropped
    assert (cov.mapped, cov.stand_ins) == (4, 1)
    assert cov.dropped_by["background task of a snapshot"] > 0
    cov = convert.generic_csv(
        os.path.join(DATA, "generic.csv"), user="person", timestamp="time_s", app="application",
        event="action", time_unit="s", verbose=False,
    ).coverage
    assert cov is not None
    assert (cov.rows_in, cov.dropped_by["event neither open nor close"], cov.users) == (7, 1, 2)
    assert cov.rows_in == cov.mapped + cov.stand_ins + cov.dropped
