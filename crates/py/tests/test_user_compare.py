"""crates/py/bench/user_compare.py: the per-user tolerances of issue 38."""
import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).parents[1] / "bench" / "user_compare.py"
spec = importlib.util.spec_from_file_location("user_compare", SCRIPT)
uc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uc)


def row(user, policy, kills, cold, gb, under):
    return {
        "user": user,
        "device": "d",
        "policy": policy,
        "kills": kills,
        "cold_relaunches": cold,
        "gb_scale_cold_relaunches": gb,
        "under_1s_share": under,
    }


def test_worse_better_and_within_follow_the_tolerances():
    rows = [
        # kills +2 on 10 (max(2, 5 %) = 2): within; +3: worse
        row("a", "android", 10, 10, 1, 0.990), row("a", "appflow", 12, 10, 2, 0.986),
        row("b", "android", 10, 10, 1, 0.990), row("b", "appflow", 13, 10, 3, 0.984),
        # 100 kills: 5 % = 5 is the tolerance; fewer by more than it: better
        row("c", "android", 100, 100, 5, 0.95), row("c", "appflow", 90, 106, 5, 0.96),
    ]
    d = uc.compare(rows, "android", "appflow")["d"]
    assert d["users"] == 3
    assert (d["kills"]["worse"], d["kills"]["better"], d["kills"]["within"]) == (1, 1, 1)
    assert d["cold_relaunches"]["worse"] == 1  # c: 106 > 100 + 5
    assert d["gb_scale_cold_relaunches"]["worse"] == 1  # b: 3 > 1 + 1; a's 2 is within
    assert d["under_1s_share"]["worse"] == 1  # b: 0.6 points below; a's 0.4 is within
    assert d["under_1s_share"]["better"] == 1  # c: 1 point above
    assert d["worse_on_any"] == 2
    assert d["kills"]["median_ratio"] == pytest.approx(1.2)
    assert d["kills"]["worst_diff"] == 3
    assert d["under_1s_share"]["worst_diff"] == pytest.approx(0.006)


def test_bad_input_exits_2_with_one_message(tmp_path, capsys):
    bad = tmp_path / "t.csv"
    bad.write_text("user,device\nu,d\n")
    with pytest.raises(SystemExit) as e:
        uc.main([str(bad)])
    assert e.value.code == 2
    assert "no column policy" in capsys.readouterr().err
    for policies in ["android", "android,android"]:
        with pytest.raises(SystemExit) as e:
            uc.main([str(bad), "--policies", policies])
        assert e.value.code == 2
        assert "--policies" in capsys.readouterr().err
