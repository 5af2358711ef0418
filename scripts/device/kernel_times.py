#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel durations (ncu --csv --metrics gpu__time_duration.sum) by kernel
name, for a quick breakdown of one training step on the GPU machine (which has ncu, not nsys).

    ncu --csv --metrics gpu__time_duration.sum --launch-count 900 ./build-gpu/uform_bench_train_cuda ... > k.csv
    python3 scripts/device/kernel_times.py k.csv
"""
import csv
import sys
from collections import defaultdict

totals, counts = defaultdict(float), defaultdict(int)
with open(sys.argv[1]) as file:
    lines = [line for line in file if line.startswith('"')]
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = row["Kernel Name"].split("(")[0][:70]
    value = float(row["Metric Value"].replace(",", ""))
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row["Metric Unit"]]
    totals[name] += value * scale
    counts[name] += 1
whole = sum(totals.values())
print(f"total {whole / 1e3:.2f} ms over {sum(counts.values())} kernels")
for name, micro in sorted(totals.items(), key=lambda item: -item[1])[:25]:
    print(f"{micro / 1e3:9.3f} ms {100 * micro / whole:5.1f}% {counts[name]:5d}  {name}")
