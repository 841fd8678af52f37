"""The walk-through's CDF plot (docs/python.md): per-user cold relaunches
by policy, one panel per device, from a sweep's per-user table (CSV).

    target/py-venv/bin/python crates/py/bench/cdf_plot.py TABLE.csv OUT.svg   (needs matplotlib)
    scripts/svg-round OUT.svg   (two decimals of a point: the same drawing, fewer bytes)

Each step of a curve is drawn once per distinct count (a count shared by
many users is one vertical rise, not one per user), and the text is SVG
text in a sans-serif font rather than glyph outlines: the same picture
in a fifth of the bytes. The file has no date and fixed ids, so drawing
it twice from the same table gives the same bytes.
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "appflow"})


def main(table_csv, out):
    df = pacsv.read_csv(table_csv).to_pandas()
    devices = list(dict.fromkeys(df["device"]))
    fig, axes = plt.subplots(1, len(devices), figsize=(5 * len(devices), 3.8), sharey=True)
    for ax, dev in zip(np.atleast_1d(axes), devices):
        d = df[df["device"] == dev]
        for pol in dict.fromkeys(d["policy"]):
            x = d[d["policy"] == pol]["cold_relaunches"].to_numpy()
            # the empirical CDF at each distinct count: the same steps as
            # one point per user, without the points inside a vertical rise
            v, n = np.unique(x, return_counts=True)
            ax.step(v, np.cumsum(n) / len(x), where="post", label=pol)
        ax.set(title=dev, xlabel="cold relaunches per user (30 days)", xscale="symlog")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("share of users")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})


if __name__ == "__main__":
    main(*sys.argv[1:3])
