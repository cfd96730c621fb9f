#!/usr/bin/env python3
"""tools/paper_tables.py: the numbers behind docs/reproduction.md, read from the outputs of
`spanprobe study --preset paper --out DIR` (runs/<run>/trainlog.csv, report.json, report.h5).

    python3 tools/paper_tables.py out/paper

Prints one plain-text table per claim; runs not (yet) in DIR are left out. Needs h5py (Debian:
python3-h5py); the program itself never runs it."""
import csv
import json
import os
import re
import statistics
import sys

import h5py

NAME = re.compile(r"^(\w+)-L(\d+)-(scaled|global)-lr([0-9.e-]+)-s(\d+)$")


def load_runs(root):
    runs = {}
    for name in sorted(os.listdir(os.path.join(root, "runs"))):
        m = NAME.match(name)
        path = os.path.join(root, "runs", name)
        if not m or not os.path.exists(os.path.join(path, "report.json")):
            continue
        variant, layers, init, lr, seed = m.groups()
        with open(os.path.join(path, "trainlog.csv")) as f:
            log = list(csv.DictReader(f))
        with open(os.path.join(path, "report.json")) as f:
            report = json.load(f)["metrics"]
        runs[(variant, int(layers), init, float(lr), int(seed))] = {"path": path, "log": log, "report": report}
    return runs


def final_val(run):
    vals = [r["val_loss"] for r in run["log"] if r["val_loss"]]
    return float(vals[-1]) if vals else float("nan")


def h5(run, name):
    with h5py.File(os.path.join(run["path"], "report.h5"), "r") as f:
        return f["metrics/" + name][()]


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def sweep(runs):
    print("== sweep: final validation loss, 8 layers, scaled init, seed 1")
    best = {}
    for v in ("pre", "post", "span", "peri", "siamese"):
        row = {lr: final_val(r) for (vv, L, i, lr, s), r in runs.items() if vv == v and L == 8 and i == "scaled" and s == 1}
        if row:
            best[v] = min(row, key=row.get)
            print(f"{v:8s}", "  ".join(f"{lr:g}: {row[lr]:.3f}" for lr in sorted(row)), f"  best {best[v]:g}")
    return best


def group(runs, variant, layers, init="scaled"):
    return sorted(((s, lr, r) for (v, L, i, lr, s), r in runs.items() if v == variant and L == layers and i == init),
                  key=lambda t: (t[0], t[1]))


def depth(runs, best):
    print("== depth: final validation loss at the best lr (seeds)")
    for v in ("pre", "post", "span"):
        cells = []
        for L in (4, 8, 16, 32, 64):
            got = [f"{final_val(r):.3f}" for s, lr, r in group(runs, v, L) if lr == best.get(v)]
            cells.append(f"L{L}: {', '.join(got) or '-'}")
        print(f"{v:5s} ({best.get(v, 0):g})", "  ".join(cells))
    print("== init: 16 layers, global against scaled, at the best lr")
    for v in ("span", "pre"):
        for init in ("global", "scaled"):
            for s, lr, r in group(runs, v, 16, init):
                if lr == best.get(v):
                    g = r["report"].get("grad_norms", {})
                    ffn = list(h5(r, "grad_norms/ffn"))
                    print(f"{v} {init} s{s}: val {final_val(r):.3f}  ffn_first {g.get('ffn_first', 0):.3e} "
                          f"ffn_last {g.get('ffn_last', 0):.3e} ffn_ratio {g.get('ffn_ratio', 0):.3g}  per block "
                          + " ".join(f"{x:.2e}" for x in ffn))


def verdict_runs(runs, best, layers_list=(16, 32), variants=("pre", "span", "post")):
    for v in variants:
        for L in layers_list:
            for s, lr, r in group(runs, v, L):
                if lr == best.get(v):
                    yield v, L, s, r


def similarity(runs, best):
    print("== claim 3: adjacent cosine deep half, S(L/2), cosine(h_0, h_L)")
    for v, L, s, r in verdict_runs(runs, best):
        m = r["report"]["similarity"]
        cos = h5(r, "similarity/cosine")
        print(f"{v} L{L} s{s}: {m['adjacent_cosine_deep_half']:.3f} {m['s_half']:.3f} {cos[0, -1]:.3f}  (val {final_val(r):.3f})")


def ffn(runs, best):
    print("== claim 4: FFN hard rank, soft rank (mean over blocks, / d_ff), EDR")
    for v, L, s, r in verdict_runs(runs, best):
        m = r["report"]["ffn_spectra"]
        print(f"{v} L{L} s{s}: {m['hard_rank_mean']:.3f} {m['soft_rank_mean']:.3f} {m['edr']:.1f}")


def conditioning(runs, best):
    print("== claim 5: kappa W1, W2 deep half; embedding max/median")
    rows = list(verdict_runs(runs, best))
    rows += [(v, 8, 1, r) for v in ("pre", "span", "post", "peri", "siamese") for s, lr, r in group(runs, v, 8) if s == 1]
    for v, L, s, r in rows:
        w, e = r["report"]["weights"], r["report"]["embed_spectrum"]
        with open(os.path.join(r["path"], "train_options.json")) as f:
            lr = json.load(f).get("lr", "?")
        print(f"{v} L{L} s{s} lr {lr}: {w['kappa_w1_deep_mean']:.1f} {w['kappa_w2_deep_mean']:.1f} {e['tok_max_over_median']:.0f}")


def jacobian(runs, best):
    print("== claim 7: sigma_max and bound by block; block 0; bound/measured of the others; failing blocks")
    for v in ("span", "post"):
        for (vv, L, i, lr, s), r in sorted(runs.items()):
            if vv != v or i != "scaled":
                continue
            sm, b = h5(r, "jacobian/sigma_max"), h5(r, "jacobian/bound")
            ratio = [bb / x for bb, x in zip(b, sm)]
            rest = ratio[1:]
            fails = [k for k, q in enumerate(ratio) if q < 1]
            print(f"{v} L{L} lr {lr:g} s{s} (val {final_val(r):.3f}): block0 {sm[0]:.1f}, {b[0]:.1f}; others median "
                  f"{statistics.median(rest):.2f} ({min(rest):.2f} to {max(rest):.2f}); fails {fails}; "
                  f"sigma_max {min(sm):.3g} to {max(sm):.3g}")


def growth(runs, best):
    print("== claim 8: last/first hidden RMS at steps 10, 100, 300, 600; max/median grad norm, steps 100 to 600")
    for (v, L, i, lr, s), r in sorted(runs.items()):
        if i != "scaled" or (L == 8 and s != 1) or (L != 8 and lr != best.get(v)):
            continue
        by_step = {int(x["step"]): x for x in r["log"]}
        cells = []
        for step in (10, 100, 300, 600):
            x = by_step.get(step)
            cells.append(f"{float(x[f'hidden_rms_{L}']) / float(x['hidden_rms_0']):.1f}" if x else "-")
        g = [(float(x["grad_norm"]), int(x["step"])) for x in r["log"] if int(x["step"]) >= 100 and x["grad_norm"]]
        top, median = max(g), statistics.median(n for n, _ in g)
        print(f"{v} L{L} lr {lr:g} s{s}: {' '.join(cells)}  grad max/median {top[0] / median:.2f} (step {top[1]})")


def main():
    runs = load_runs(sys.argv[1])
    print(f"{len(runs)} finished runs in {sys.argv[1]}")
    best = sweep(runs)
    depth(runs, best)
    similarity(runs, best)
    ffn(runs, best)
    conditioning(runs, best)
    jacobian(runs, best)
    growth(runs, best)


if __name__ == "__main__":
    main()
