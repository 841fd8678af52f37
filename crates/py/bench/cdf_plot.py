"""The walk-through's CDF plot (docs/python.md): per-user cold relaunches
by policy, one panel per device, from a sweep's per-user table (CSV).

    target/py-venv/bin/python crates/py/bench/cdf_plot.py TABLE.csv OUT.svg   (needs matplotlib)
    scripts/svg-round OUT.svg   (two decimals of a point: the same drawing, 40 % fewer bytes)
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402


def main(table_csv, out):
    df = pacsv.read_csv(table_csv).to_pandas()
    devices = list(dict.fromkeys(df["device"]))
    fig, axes = plt.subplots(1, len(devices), figsize=(5 * len(devices), 3.8), sharey=True)
    for ax, dev in zip(np.atleast_1d(axes), devices):
        d = df[df["device"] == dev]
        for pol in dict.fromkeys(d["policy"]):
            x = np.sort(d[d["policy"] == pol]["cold_relaunches"].to_numpy())
            ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=pol)
        ax.set(title=dev, xlabel="cold relaunches per user (30 days)", xscale="symlog")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("share of users")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
