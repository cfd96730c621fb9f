"""Stage tables of `spanprobe analyze` next to a PyTorch analysis benchmark, round by round
(bench/run_analyze_bench.sh, bench/run_hf_analyze_bench.sh). Python 3 standard library only.

Usage: python3 bench/stage_table.py OURS_1.txt THEIRS_1.json [OURS_2.txt THEIRS_2.json ...]
OURS: the stdout of `spanprobe analyze` (its stage table); THEIRS: the JSON object of
bench/analyze_torch.py or bench/analyze_hf_torch.py.
"""
import json
import re
import sys


def spanprobe_run(path):
    """{"stages": {name: seconds}, "total": s, "peak_rss_mib": ..., "peak_backend_mib": ...,
    "weights_mib": ..., "activations_mib": ...} from analyze's stdout. The stage table's lines are
    "name [(pass|finish)] seconds [peak MiB]"; an analyzer's pass and finish add up; the first line is
    "forward passes (and begin)"."""
    run = {"stages": {}}
    for line in open(path):
        m = re.match(r"^(.+?)\s+(?:\((?:pass|finish)\)\s+)?([0-9.]+)(?:\s+[0-9.]+)?$", line.strip())
        if m:
            name = re.sub(r" \(and begin\)$", "", m.group(1))
            run["stages"][name] = run["stages"].get(name, 0) + float(m.group(2))
        for key, pattern in [("peak_rss_mib", r"^peak memory: ([0-9.]+) MiB"),
                             ("peak_backend_mib", r"^peak \w+ memory: ([0-9.]+) MiB"),
                             ("weights_mib", r"^model: ([0-9.]+) MiB of weights"),
                             ("activations_mib", r"^model: .* ([0-9.]+) MiB of activations")]:
            m = re.match(pattern, line)
            if m:
                run[key] = float(m.group(1))
    run["total"] = run["stages"].pop("total")
    return run


def print_round(i, ours, theirs):
    s, t = spanprobe_run(ours), json.load(open(theirs))
    print(f"\nround {i}: {'stage':<18} {'spanprobe s':>12} {'pytorch s':>10} {'ratio':>7}")
    for name, sec in s["stages"].items():
        other = t["stages"].get(name, float("nan"))
        print(f"         {name:<18} {sec:12.2f} {other:10.2f} {other / sec if sec else float('nan'):7.2f}")
    print(f"         {'total':<18} {s['total']:12.2f} {t['total_s']:10.2f} {t['total_s'] / s['total']:7.2f}"
          "  (ratio = pytorch / spanprobe: > 1 means spanprobe is faster)")
    print(f"         peak memory: spanprobe {s['peak_rss_mib']:.0f} MiB, pytorch {t['peak_rss_mib']:.0f} MiB"
          f" ({t['impl']})")


def main():
    paths = sys.argv[1:]
    if not paths or len(paths) % 2:
        sys.exit(__doc__)
    for i in range(0, len(paths), 2):
        print_round(i // 2 + 1, paths[i], paths[i + 1])


if __name__ == "__main__":
    main()
