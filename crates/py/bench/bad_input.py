"""Bad input cases and the ValueError each gives (issue 27 "Bad input").

    scripts/result py/bad-input -- target/py-venv/bin/python crates/py/bench/bad_input.py
"""
import json
import os
import tempfile

import pyarrow as pa

import appflow_sim as af
from appflow_sim import convert

DATA = os.path.join(os.path.dirname(__file__), "..", "tests", "data")


def case(name, f):
    before = set(os.listdir(TMP))
    try:
        f()
    except ValueError as e:
        return {"case": name, "error": "ValueError", "message": str(e)[:300],
                "files_left": sorted(set(os.listdir(TMP)) - before)}
    except Exception as e:  # noqa: BLE001 (reported, not hidden)
        return {"case": name, "error": type(e).__name__, "message": str(e)[:300]}
    return {"case": name, "error": None}


TMP = tempfile.mkdtemp()
tr = af.generate_trace(days=1)
cases = [
    case("unknown device", lambda: af.simulate(tr, "pixel99", "android")),
    case("unknown policy", lambda: af.simulate(tr, "pixel8-8gb", "android,nope")),
    case("unknown policy in a Ray sweep", lambda: af.sweep(tr, "pixel8-8gb", "nope", backend="ray")),
    case("malformed trace line", lambda: af.Trace.from_csv(os.path.join(DATA, "bad_line.csv"))),
    case("malformed Arrow trace", lambda: af.Trace.from_arrow(pa.table(
        {"user": ["a", "a"], "timestamp": [5, 4], "app": ["TikTok", "TikTok"], "event": ["open", "close"]}))),
    case("unknown app", lambda: af.Trace.from_arrow(pa.table(
        {"user": ["a"], "timestamp": [5], "app": ["Nope"], "event": ["open"]}))),
    case("LSApp file given to the StudentLife converter",
         lambda: convert.studentlife(os.path.join(DATA, "lsapp_tiny.tsv"))),
    case("StudentLife file given to the LSApp converter",
         lambda: convert.lsapp(os.path.join(DATA, "running_app_u00.csv"))),
    case("unknown population", lambda: af.generate_trace(users=2, population="crowd")),
    case("unknown backend", lambda: af.sweep(tr, "pixel8-8gb", "android", backend="mpi")),
]
print(json.dumps({"cases": cases, "all_value_errors": all(c["error"] == "ValueError" for c in cases),
                  "nothing_written": all(not c.get("files_left") for c in cases)}, indent=1))
