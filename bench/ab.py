#!/usr/bin/env python3
"""Alternating A/B run of two benchmark build trees: did B lose speed against A?

  python3 bench/ab.py --a BUILD_DIR_A --b BUILD_DIR_B [--filter REGEX]
                      [--filter-benchmarks REGEX] [--rounds 5] [--min-time 0.05]

  python3 bench/ab.py --a build/bench-old --b build/bench --filter softmax
  python3 bench/ab.py --a /work/ab/a --b /work/ab/b --filter-benchmarks 'attend/f32'
  python3 bench/ab.py --a /work/ab/a --b /work/ab/b --targets --rounds 7 --min-time 0.1

Runs the benchmark binaries both trees have (BUILD_DIR/bench/bench_*, --filter on their names)
round by round, A, B, A, B, ...: in each round every binary of A and the same binary of B back
to back, one repetition each, so that the machine's load in a round falls on both sides alike.
A runs first in rounds 1, 3, 5, ... and B in rounds 2, 4, ... (--order ab: A always first), so
that neither side always takes the second place in a round. Per benchmark it keeps every round's
time (CPU time) and prints the fastest of A, of B, and B/A of the fastest and of the medians
of the rounds. Then, for each of bench/ratios.py's TARGETS, the target's ratio in A and in B
(the benchmark over its baseline, same binary and round) and B/A, from the median of the rounds'
ratios and from the fastest times. "!" marks a row whose B/A exceeds --threshold (1.05) in both:
a loss the noise is unlikely to have made. Two builds of the same commit read within noise.
--targets runs only the benchmarks the TARGETS name (numerators and baselines): the check that
a change lost no speed on docs/performance.md's targets table.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios  # noqa: E402  (bench/ratios.py: TARGETS and the runner)


def common_binaries(a, b, regex):
    """[(name, path in A, path in B)] of the benchmark binaries both trees have."""
    in_a = {os.path.basename(p): p for p in ratios.find_binaries(a, regex)}
    in_b = {os.path.basename(p): p for p in ratios.find_binaries(b, regex)}
    for only, tree in ((sorted(set(in_a) - set(in_b)), b), (sorted(set(in_b) - set(in_a)), a)):
        if only:
            print("not in %s, skipped: %s" % (tree, ", ".join(only)), file=sys.stderr)
    names = sorted(set(in_a) & set(in_b))
    if not names:
        sys.exit("no benchmark binary is in both trees")
    return [(n, in_a[n], in_b[n]) for n in names]


def run_rounds(pairs, args):
    """{"a"|"b": [{benchmark: ns} per round]}: in every round each binary of A and of B back to
    back, A first in rounds 1, 3, 5, ... and B first in the others (--order alternate), or A
    first always (--order ab)."""
    once = argparse.Namespace(min_time=args.min_time, repetitions=1,
                              filter_benchmarks=args.filter_benchmarks)
    rounds = {"a": [], "b": []}
    for r in range(args.rounds):
        print("round %d/%d" % (r + 1, args.rounds), file=sys.stderr, flush=True)
        this = {"a": {}, "b": {}}
        sides = (("a", 1), ("b", 2)) if args.order == "ab" or r % 2 == 0 else (("b", 2), ("a", 1))
        for pair in pairs:
            for side, index in sides:
                this[side].update(ratios.fastest(ratios.run_binary(pair[index], once, None)))
        rounds["a"].append(this["a"])
        rounds["b"].append(this["b"])
    return rounds


def times(rounds, name):
    return [r[name] for r in rounds if name in r]


def ratio_per_round(rounds, num, den):
    return [r[num] / r[den] for r in rounds if num in r and den in r and r[den] > 0]


def flag(median_ratio, best_ratio, threshold):
    return "!" if median_ratio > threshold and best_ratio > threshold else ""


def benchmark_table(rounds, threshold):
    names = sorted(set().union(*rounds["a"]) & set().union(*rounds["b"]))
    out = ["| benchmark | A (fastest) | B (fastest) | B/A fastest | B/A median | |",
           "|---|---:|---:|---:|---:|---|"]
    for name in names:
        ta, tb = times(rounds["a"], name), times(rounds["b"], name)
        if min(ta) <= 0 or min(tb) <= 0:  # a benchmark that reports no time (skipped)
            continue
        best = min(tb) / min(ta)
        median = statistics.median(tb) / statistics.median(ta)
        out.append("| %s | %s | %s | %.3f | %.3f | %s |" % (
            name, ratios.fmt_time(min(ta)), ratios.fmt_time(min(tb)), best, median,
            flag(median, best, threshold)))
    return "\n".join(out) + "\n"


def targets_table(rounds, threshold):
    out = ["| target (bound) | A median | B median | B/A median | A fastest | B fastest "
           "| B/A fastest | |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for label, num, den, bound in ratios.TARGETS:
        ra = ratio_per_round(rounds["a"], num, den)
        rb = ratio_per_round(rounds["b"], num, den)
        if not ra or not rb:
            continue
        med_a, med_b = statistics.median(ra), statistics.median(rb)
        best_a = min(times(rounds["a"], num)) / min(times(rounds["a"], den))
        best_b = min(times(rounds["b"], num)) / min(times(rounds["b"], den))
        bound_text = " (≤ %g)" % bound if bound is not None else ""
        out.append("| %s%s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
            label, bound_text, med_a, med_b, med_b / med_a, best_a, best_b, best_b / best_a,
            flag(med_b / med_a, best_b / best_a, threshold)))
    if len(out) == 2:
        out.append("| (no target's two benchmarks ran in both trees) | | | | | | | |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, metavar="BUILD_DIR_A", help="the reference build tree")
    p.add_argument("--b", required=True, metavar="BUILD_DIR_B", help="the build tree to check")
    p.add_argument("--filter", default=None, help="regex on binary names (bench_softmax, ...)")
    p.add_argument("--filter-benchmarks", default=None, help="Google Benchmark --benchmark_filter")
    p.add_argument("--targets", action="store_true",
                   help="only the benchmarks bench/ratios.py's TARGETS name (sets the filter)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.05, help="seconds per benchmark and run")
    p.add_argument("--order", choices=("alternate", "ab"), default="alternate",
                   help="who runs first in a round: A in odd rounds and B in even ones "
                        "(alternate), or A always (ab)")
    p.add_argument("--threshold", type=float, default=1.05,
                   help="B/A above which a row is marked, in both median and fastest")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.targets:
        if args.filter_benchmarks:
            p.error("--targets sets the benchmark filter: give one or the other")
        args.filter_benchmarks = ratios.targets_filter()

    pairs = common_binaries(args.a, args.b, args.filter)
    rounds = run_rounds(pairs, args)
    print("# A/B: B's time over A's\n")
    for side, tree in (("A", args.a), ("B", args.b)):
        print("- %s = %s (commit %s)" % (side, ratios.describe_build(tree),
                                         ratios.commit_of(ratios.source_dir(tree))))
    order = "A first in odd rounds, B in even" if args.order == "alternate" else "A first"
    print("- CPU: %s; one thread; %d rounds (%s), one repetition of %g s per binary and side; "
          "%s\n" % (ratios.cpu_model(), args.rounds, order, args.min_time,
                     ", ".join(n for n, _, _ in pairs)))
    print("## Benchmarks\n")
    print(benchmark_table(rounds, args.threshold))
    print("## Targets (bench/ratios.py's TARGETS): the ratio in A, in B, and B/A\n")
    print(targets_table(rounds, args.threshold))
    print("\"!\": B/A above %g in both the median of the rounds and the fastest." % args.threshold)


if __name__ == "__main__":
    main()
