# %% [markdown]
# # Sales analysis
# A starter in "percent" cells (# %%): run it whole with `python3 analysis.py`
# or cell by cell in an editor that knows the format. It uses pandas, numpy
# and matplotlib when they are installed, and the standard library otherwise,
# so it runs in any sandbox.

# %% Load the data
import csv
import os
import statistics
from collections import defaultdict

DATA_FILE = os.environ.get("DATA_FILE", "data/sales.csv")
OUT_DIR = "output"
os.makedirs(OUT_DIR, exist_ok=True)

try:
    import pandas as pd
except ImportError:
    pd = None

# %% Summarise by region
if pd is not None:
    df = pd.read_csv(DATA_FILE, parse_dates=["date"])
    by_region = df.groupby("region")["revenue"].agg(["count", "sum", "mean"])
    summary = {r: (int(v["count"]), float(v["sum"]), float(v["mean"])) for r, v in by_region.iterrows()}
    total = float(df["revenue"].sum())
else:
    rows = list(csv.DictReader(open(DATA_FILE, newline="")))
    groups = defaultdict(list)
    for row in rows:
        groups[row["region"]].append(float(row["revenue"]))
    summary = {r: (len(v), sum(v), statistics.mean(v)) for r, v in groups.items()}
    total = sum(sum(v) for v in groups.values())

lines = [f"{'region':<8} {'orders':>6} {'revenue':>10} {'mean':>8}"]
for region in sorted(summary):
    n, s, m = summary[region]
    lines.append(f"{region:<8} {n:>6} {s:>10.2f} {m:>8.2f}")
lines.append(f"total revenue: {total:.2f}")
report = "\n".join(lines) + "\n"
print(report, end="")
with open(os.path.join(OUT_DIR, "summary.txt"), "w") as f:
    f.write(report)

# %% Chart (only with matplotlib)
try:
    import matplotlib

    matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
    import matplotlib.pyplot as plt

    regions = sorted(summary)
    plt.bar(regions, [summary[r][1] for r in regions])
    plt.title("Revenue by region")
    plt.savefig(os.path.join(OUT_DIR, "revenue_by_region.png"))
    print("chart: output/revenue_by_region.png")
except ImportError:
    print("matplotlib not installed: no chart")
