#!/usr/bin/env python3
"""Prints, for every criterion group, each benchmark's median time and its ratio to the group's
baseline measured in the same run (the first non-Luge function of the group, or --baseline)."""
import json, pathlib, sys, collections

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
OURS = {"deadline_queue", "ct_edf", "sledgescale", "estimator", "luge", "luge_async"}
rows = collections.defaultdict(dict)
for est in root.glob("*/*/*/new/estimates.json"):
    group, func, param = est.parts[-5], est.parts[-4], est.parts[-3]
    median = json.loads(est.read_text())["median"]["point_estimate"]
    rows[(group, param)][func] = median
def key(k):
    g, p = k
    return (g, int(p) if p.isdigit() else p)
print(f"{'group':<20} {'size':>7}  {'function':<20} {'median ns':>10}  ratio vs baseline")
for (group, param) in sorted(rows, key=key):
    funcs = rows[(group, param)]
    bases = [f for f in funcs if f not in OURS]
    for f, t in sorted(funcs.items()):
        ratios = ", ".join(f"{t / funcs[b]:.2f}x {b}" for b in bases if b != f)
        print(f"{group:<20} {param:>7}  {f:<20} {t:>10.1f}  {ratios}")
