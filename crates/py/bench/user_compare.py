"""Policies compared with a baseline user by user, from a sweep's per-user table.

    target/py-venv/bin/python crates/py/bench/user_compare.py TABLE.csv[.gz] \
        [--policies android,appflow[,...]] [--svg OUT.svg]

Prints JSON: for each policy after the first (the baseline, android), per
device and metric, how many users it leaves worse than the baseline,
better, or within the tolerance, the median user's ratio (over the users
where the baseline has any) and the worst user's difference. The
tolerances are issue 38's:

* kills, cold relaunches: worse when above the baseline + max(2, 5 %);
* GB-scale cold relaunches: worse when above the baseline + 1;
* launches under 1 s: worse when below the baseline - 0.5 points.

With --svg (needs matplotlib) it also draws the per-user CDF of each
metric (rows) on each device (columns), one curve for each of the first
two policies; then run
`scripts/svg-round OUT.svg 1` (0.1 pt). Each curve is drawn at every 2nd percentile
of users plus both ends: the docs' budget holds eight such panels, and
a user's step smaller than 2 % of the users cannot be seen at this size.
Bad input (a missing file or column, a policy not in the table) exits 2
with one message.
"""
import argparse
import json
import statistics
import sys

import pyarrow.csv as pacsv

# (column, label, worse(baseline, other) -> bool, higher is worse)
METRICS = [
    ("kills", "kills", lambda a, b: b > a + max(2, 0.05 * a), True),
    ("cold_relaunches", "cold relaunches", lambda a, b: b > a + max(2, 0.05 * a), True),
    ("gb_scale_cold_relaunches", "GB-scale cold relaunches", lambda a, b: b > a + 1, True),
    ("under_1s_share", "launches under 1 s", lambda a, b: (a - b) * 100 > 0.5, False),
]
COLUMNS = ["user", "device", "policy"] + [m[0] for m in METRICS]


def fail(msg):
    print(f"user_compare: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        t = pacsv.read_csv(path)
    except Exception as e:  # pyarrow raises several kinds for one cause
        fail(f"{path}: cannot read it as CSV ({e})")
    missing = [c for c in COLUMNS if c not in t.column_names]
    if missing:
        fail(f"{path}: no column {', '.join(missing)} (a sweep's per-user table has them)")
    return t.select(COLUMNS).to_pylist()


def compare(rows, base, other):
    """{device: {metric: summary}} over the users both policies ran."""
    by = {}
    for r in rows:
        by.setdefault(r["device"], {}).setdefault(r["user"], {})[r["policy"]] = r
    out = {}
    for dev, users in by.items():
        pairs = [(u[base], u[other]) for u in users.values() if base in u and other in u]
        if not pairs:
            continue
        d = {"users": len(pairs)}
        for col, _, worse_fn, higher_worse in METRICS:
            worse = sum(worse_fn(a[col], b[col]) for a, b in pairs)
            better = sum(worse_fn(b[col], a[col]) for a, b in pairs)
            ratios = [b[col] / a[col] for a, b in pairs if a[col] > 0]
            diffs = [(b[col] - a[col]) * (1 if higher_worse else -1) for a, b in pairs]
            d[col] = {
                "worse": worse,
                "better": better,
                "within": len(pairs) - worse - better,
                "worse_share": worse / len(pairs),
                "median_ratio": statistics.median(ratios) if ratios else None,
                "worst_diff": max(diffs),
                f"median_{base}": statistics.median(a[col] for a, _ in pairs),
                f"median_{other}": statistics.median(b[col] for _, b in pairs),
            }
        d["worse_on_any"] = sum(
            any(f(a[c], b[c]) for c, _, f, _ in METRICS) for a, b in pairs
        )
        d["worse_on_any_share"] = d["worse_on_any"] / len(pairs)
        out[dev] = d
    return out


def draw(rows, policies, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "appflow", "font.size": 8})
    devices = list(dict.fromkeys(r["device"] for r in rows))
    fig, axes = plt.subplots(
        len(METRICS), len(devices), figsize=(3.6 * len(devices), 2.0 * len(METRICS)), squeeze=False,
        sharey=True,
    )
    q = np.linspace(0, 1, 51)
    for j, dev in enumerate(devices):
        for i, (col, label, _, _) in enumerate(METRICS):
            ax = axes[i][j]
            for pol in policies:
                x = np.sort([r[col] for r in rows if r["device"] == dev and r["policy"] == pol])
                if len(x) == 0:
                    continue
                v = np.quantile(x, q, method="inverted_cdf")
                ax.step(v, q, where="post", label=pol, lw=1)
            ax.set_xlabel(label + ("" if col == "under_1s_share" else " per user"))
            if col != "under_1s_share":
                ax.set_xscale("symlog")
            ax.spines[["top", "right"]].set_visible(False)
            if i == 0:
                ax.set_title(dev)
            ax.set_yticks([0, 0.5, 1])
            if j == 0:
                ax.set_ylabel("share of users")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("table")
    p.add_argument("--policies", default="android,appflow")
    p.add_argument("--svg")
    a = p.parse_args(argv)
    policies = [x for x in a.policies.split(",") if x]
    if len(policies) < 2 or len(set(policies)) != len(policies):
        fail(f"--policies {a.policies!r}: give two or more, each once, the baseline first")
    rows = load(a.table)
    have = {r["policy"] for r in rows}
    for pol in policies:
        if pol not in have:
            fail(f"--policies: {pol!r} is not in the table (it has {', '.join(sorted(have))})")
    rows = [r for r in rows if r["policy"] in policies]
    out = {pol: compare(rows, policies[0], pol) for pol in policies[1:]}
    if a.svg:
        draw([r for r in rows if r["policy"] in policies[:2]], policies[:2], a.svg)
    json.dump({"baseline": policies[0], "policies": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
