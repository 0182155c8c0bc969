#!/usr/bin/python3
"""Plot Gryphon CC §5 E1 as the simulator runs it (`aerie sim --topology cc`):
the pubend's rate limit and what each SHB receives, how far s2's doubt horizon
lags the present with and without congestion control, and s2's NACK window.

usage: plot_cc_e1.py CC.csv NOCC.csv OUT.png
  CC.csv:   aerie sim --topology cc --seed 1 --trace-file CC.csv
  NOCC.csv: aerie sim --topology cc --seed 1 --congestion-control=false --trace-file NOCC.csv
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

cc_src, nocc_src, out = sys.argv[1], sys.argv[2], sys.argv[3]


def load(path):
    return list(csv.DictReader(open(path)))


def series(rows, broker, field, scale=1.0, skip_empty=True):
    xs, ys = [], []
    for r in rows:
        if r["broker"] != broker or (skip_empty and r[field] == ""):
            continue
        xs.append(int(r["t_ms"]) / 1000)
        ys.append(float(r[field] or 0) * scale)
    return xs, ys


def smooth(ys, n=10):
    """Mean over the last n windows (1 s of 100 ms windows)."""
    return [sum(ys[max(0, i - n + 1):i + 1]) / len(ys[max(0, i - n + 1):i + 1]) for i in range(len(ys))]


cc, nocc = load(cc_src), load(nocc_src)
fig, (a, b, c) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
for broker, colour in (("s1", "tab:blue"), ("s2", "tab:red")):
    x, y = series(cc, broker, "deliveries", 10)  # one subscriber per SHB: events/s
    a.plot(x, smooth(y), color=colour, label=f"received at {broker} (events/s)")
x, y = series(cc, "p1", "rate_limit")
a.step(x, [v if v > 0 else float("nan") for v in y], where="post", color="black", label="pubend rate limit (events/s)")
a.axvspan(5, 20, color="grey", alpha=0.15, label="b1–s2 failed")
a.set_ylabel("events/s")
a.legend(fontsize=7, loc="upper right")
for rows, label, colour in ((cc, "congestion control", "tab:green"), (nocc, "none (stops at the violation)", "tab:red")):
    x, y = series(rows, "s2", "dh_lag_ms", 1 / 1000)
    keep = [(t, v) for t, v in zip(x, y) if v < 1e6]  # before its stream starts the lag is the epoch
    b.plot([t for t, _ in keep], [v for _, v in keep], color=colour, label=label)
b.axhline(2, color="grey", linestyle=":")
b.axvline(60, color="grey", linestyle="--", label="oracle bound (CC2)")
b.set_ylabel("s2 doubt horizon\nlag (s)")
b.legend(fontsize=7)
x, y = series(cc, "s2", "nack_window_ms")
c.step(x, y, where="post", color="tab:purple")
c.set_ylabel("s2 NACK window\n(ms of ticks)")
c.set_xlabel("simulated time (s)")
c.set_xlim(0, 75)
fig.suptitle("Gryphon CC §5 E1 in aerie's simulator: b1–s2 (48 KB/s) fails for 15 s")
fig.tight_layout()
fig.savefig(out, dpi=110)
