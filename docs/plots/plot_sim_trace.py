#!/usr/bin/python3
"""Plot an `aerie sim --trace` CSV the way seed 000 Fig. 6 shows a failure:
latency at two subscriber-hosting brokers, and the nacks one of them sends.

usage: plot_sim_trace.py TRACE.csv OUT.png [failed_broker sibling_broker]
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
failed, sibling = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("s1", "s2")
rows = list(csv.DictReader(open(src)))


def series(broker, field, delivered_only=False):
    """One point per 100 ms window; latency only where something arrived."""
    xs, ys = [], []
    for r in rows:
        if r["broker"] == broker and not (delivered_only and r["deliveries"] == "0"):
            xs.append(int(r["t_ms"]) / 1000)
            ys.append(float(r[field]))
    return xs, ys


fig, (a, b, c) = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
x, y = series(failed, "latency_ms_max", True)
a.plot(x, y, ".", color="tab:red", markersize=4)  # no line: nothing arrives during the cut
a.set_ylabel(f"latency at {failed}\n(ms, max per 100 ms)")
x, y = series(failed, "nacks_sent")
b.step(x, y, where="post", color="tab:orange", label="nacks sent")
x2, y2 = series(failed, "nack_range_ms")
b2 = b.twinx()
b2.plot(x2, y2, color="tab:purple", label="nack range (ms of ticks)")
b.set_ylabel(f"nacks sent by {failed}")
b2.set_ylabel("nack range (ms)")
x, y = series(sibling, "latency_ms_max", True)
c.plot(x, y, ".-", color="tab:green", markersize=3)
c.set_ylim(0, max(y + [1]) * 3)
c.set_ylabel(f"latency at {sibling}\n(ms, max per 100 ms)")
c.set_xlabel("simulated time (s)")
for ax in (a, b, c):
    ax.axvspan(10, 12.5, color="grey", alpha=0.15)
    ax.axvspan(12.5, 22.5, color="red", alpha=0.08)
a.set_xlim(5, 30)
a.set_title("b1–s1 stalled 10–12.5 s (grey), then failed until 22.5 s (red)")
fig.tight_layout()
fig.savefig(out, dpi=90)
