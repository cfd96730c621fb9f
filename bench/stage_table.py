"""Stage tables of `spanprobe analyze` next to PyTorch analysis benchmarks, round by round
(bench/run_analyze_bench.sh, bench/run_hf_analyze_bench.sh). Python 3 standard library only.

Usage: python3 bench/stage_table.py OURS_1.txt THEIRS_1.json [THEIRS_1b.json ...] [OURS_2.txt ...]
OURS (a .txt): the stdout of `spanprobe analyze` (its stage table), starting a round; THEIRS (each
.json after it): the JSON object of bench/analyze_torch.py or bench/analyze_hf_torch.py, one column
each (for example PyPI's current PyTorch, then Debian's).
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


def print_round(i, ours, theirs_paths):
    s = spanprobe_run(ours)
    theirs = [json.load(open(p)) for p in theirs_paths]
    head = "".join(f" {t['impl'] + ' s':>17} {'ratio':>6}" for t in theirs)
    print(f"\nround {i}: {'stage':<18} {'spanprobe s':>12}{head}")
    for name, sec in s["stages"].items():
        cols = ""
        for t in theirs:
            other = t["stages"].get(name, float("nan"))
            cols += f" {other:17.2f} {other / sec if sec else float('nan'):6.2f}"
        print(f"         {name:<18} {sec:12.2f}{cols}")
    cols = "".join(f" {t['total_s']:17.2f} {t['total_s'] / s['total']:6.2f}" for t in theirs)
    print(f"         {'total':<18} {s['total']:12.2f}{cols}  (ratio = pytorch / spanprobe: > 1 means spanprobe is faster)")
    mem = ", ".join(f"{t['impl']} {t['peak_rss_mib']:.0f} MiB" for t in theirs)
    print(f"         peak memory: spanprobe {s['peak_rss_mib']:.0f} MiB, {mem}")


def main():
    rounds = []
    for path in sys.argv[1:]:
        if path.endswith(".json"):
            if not rounds:
                sys.exit(__doc__)
            rounds[-1][1].append(path)
        else:
            rounds.append((path, []))
    if not rounds or any(not theirs for _, theirs in rounds):
        sys.exit(__doc__)
    for i, (ours, theirs) in enumerate(rounds):
        print_round(i + 1, ours, theirs)


if __name__ == "__main__":
    main()
