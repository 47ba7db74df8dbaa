#!/usr/bin/env python3
"""Run attn's benchmarks and print each kernel's time as ratios against its baselines.

Every benchmark is named kernel/type/impl/size... (bench/common.hpp); implementations of the
same kernel, type and size were measured in the same run, so their ratios are what to read
on a noisy machine. Repetitions are interleaved at random and the fastest repetition of
each benchmark is kept (the least disturbed one).

  python3 bench/ratios.py                       # runs build/bench/bench/bench_*
  python3 bench/ratios.py --build-dir DIR       # another build tree
  python3 bench/ratios.py --matrix              # configure, build and run g++/clang++ x
                                                # -march=native/-mavx2 -mfma, one table each
  python3 bench/ratios.py --filter attend       # only binaries/benchmarks matching a regex
  python3 bench/ratios.py --json-dir DIR        # also keep Google Benchmark's JSON per binary
  python3 bench/ratios.py --matrix --write docs/performance-tables.md
                                                # also write the tables to a file of their own

After the tables it prints issues 5's and 21's targets, one column per build, "✗" where one is missed.
--write FILE replaces FILE with the targets and the per-build tables under a generated-file
header (the command, date, commit and CPU); nothing else is ever written, so docs/performance.md
is prose only and its targets table is copied from FILE by hand.

A ratio below 1 means attn is faster. Columns: attn's time per call, then attn/impl for
every other implementation that ran (naive, eigen, glibc, readonce, ...).
"""
import argparse
import datetime
import glob
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, C++ compiler, ATTN_BENCH_FLAGS) for --matrix
MATRIX = [
    ("gcc-native", "g++", "-march=native"),
    ("clang-native", "clang++", "-march=native"),
    ("gcc-avx2", "g++", "-mavx2 -mfma"),
    ("clang-avx2", "clang++", "-mavx2 -mfma"),
]

# The order implementations appear in, after attn; anything else follows alphabetically.
IMPL_ORDER = ["naive", "eigen", "glibc", "readonce", "floor", "forward", "fma_ref", "twopass",
              "onepass", "attn_weights"]


# Issues 5's and 21's targets: (label, benchmark, baseline, bound). A cell is the benchmark's time over
# the baseline's in the same run; the target holds when it is at most the bound.
TARGETS = [
    ("exp vs glibc expf, n = 65536 (float)", "exp/f32/attn/65536", "exp/f32/glibc/65536", 1.25),
    ("softmax vs Eigen, n = 64", "softmax/f32/attn/64", "softmax/f32/eigen/64", 1.0),
    ("softmax vs Eigen, n = 1024", "softmax/f32/attn/1024", "softmax/f32/eigen/1024", 1.0),
    ("softmax vs Eigen, n = 65536", "softmax/f32/attn/65536", "softmax/f32/eigen/65536", 1.0),
    ("softmax vs Eigen, n = 1M", "softmax/f32/attn/1048576", "softmax/f32/eigen/1048576", 1.0),
    ("softmax vs Eigen, n = 1024, double", "softmax/f64/attn/1024", "softmax/f64/eigen/1024", 1.0),
    ("softmax vs naive, n = 64", "softmax/f32/attn/64", "softmax/f32/naive/64", 0.1),
    ("softmax vs naive, n = 1024", "softmax/f32/attn/1024", "softmax/f32/naive/1024", 0.1),
    ("softmax vs naive, n = 65536", "softmax/f32/attn/65536", "softmax/f32/naive/65536", 0.1),
    ("softmax vs naive, n = 1M", "softmax/f32/attn/1048576", "softmax/f32/naive/1048576", 0.1),
    ("softmax vs naive, n = 1024, double", "softmax/f64/attn/1024", "softmax/f64/naive/1024", 0.1),
    # No target: attn's exp with nothing around it (bench/softmax.cpp's floor) against the
    # naive loop, what the two targets above could reach with the exp attn has.
    ("floor (attn's exp alone) vs naive, n = 64", "softmax/f32/floor/64", "softmax/f32/naive/64", None),
    ("floor (attn's exp alone) vs naive, n = 1024, double", "softmax/f64/floor/1024",
     "softmax/f64/naive/1024", None),
    ("attend vs Eigen, (64, 64)", "attend/f32/attn/64/64", "attend/f32/eigen/64/64", 1.0),
    ("attend vs Eigen, (1024, 64)", "attend/f32/attn/1024/64", "attend/f32/eigen/1024/64", 1.0),
    ("attend vs Eigen, (65536, 128)", "attend/f32/attn/65536/128", "attend/f32/eigen/65536/128", 0.8),
    ("attend vs read-once, (65536, 128) = 32 MiB", "attend/f32/attn/65536/128",
     "attend/f32/readonce/65536/128", 1.3),
    ("attend vs Eigen, (64, 64), double", "attend/f64/attn/64/64", "attend/f64/eigen/64/64", 1.0),
    ("attend vs Eigen, (1024, 64), double", "attend/f64/attn/1024/64", "attend/f64/eigen/1024/64", 1.0),
    ("attend vs Eigen, (65536, 128), double", "attend/f64/attn/65536/128",
     "attend/f64/eigen/65536/128", 0.8),
    ("attend vs read-once, (65536, 128) double = 64 MiB", "attend/f64/attn/65536/128",
     "attend/f64/readonce/65536/128", 1.3),
    ("attend fixed (3,3) vs Eigen Matrix<float,3,3>", "attend_fixed/f32/attn/3/3",
     "attend_fixed/f32/eigen/3/3", 1.0),
    ("attend fixed (3,3) vs Eigen, double", "attend_fixed/f64/attn/3/3", "attend_fixed/f64/eigen/3/3", 1.0),
    ("backward_from_forward vs forward, (1024, 64) double", "backward_1p/f64/attn/1024/64",
     "backward_1p/f64/forward/1024/64", 2.0),
    ("backward (recomputes the forward) vs forward, (1024, 64) double", "backward/f64/attn/1024/64",
     "backward/f64/forward/1024/64", None),
    ("dc/dq vs the n·d² FMA loop, (1024, 64) double", "jacobian_query/f64/attn/1024/64",
     "jacobian_query/f64/fma_ref/1024/64", 2.0),
    # Issue 21: scaled_dot_product_attention (bench/sdpa.cpp), one head, d_k = d_v = 64, the map
    # not stored unless said; blas: sgemm, attn's softmax, sgemm; gemm: the two sgemm alone.
    ("sdpa vs BLAS unfused, T = n = 1024", "sdpa/f32/attn/1024", "sdpa/f32/blas/1024", 1.0),
    ("sdpa vs the GEMM bound, T = n = 1024", "sdpa/f32/attn/1024", "sdpa/f32/gemm/1024", 1.25),
    ("sdpa vs BLAS unfused, T = n = 4096", "sdpa/f32/attn/4096", "sdpa/f32/blas/4096", 0.8),
    ("sdpa causal vs unmasked, T = n = 1024", "sdpa_causal/f32/attn/1024",
     "sdpa_causal/f32/unmasked/1024", 0.6),
    ("sdpa with the map vs without, T = n = 1024", "sdpa_map/f32/attn/1024",
     "sdpa_map/f32/without/1024", 1.2),
    ("sdpa backward vs forward, T = n = 1024", "sdpa_backward/f32/attn/1024",
     "sdpa_backward/f32/forward/1024", 2.5),
    ("sdpa vs dgemm unfused, T = n = 1024, double", "sdpa/f64/attn/1024", "sdpa/f64/blas/1024", 1.0),
    ("sdpa 8 heads, 2 threads vs 1 (wall time), T = n = 1024", "sdpa_threads/f32/attn/1024",
     "sdpa_threads/f32/one/1024", 0.6),
    # multi_head_attention (bench/heads.cpp): T = 1024, d_model 512, d_k = d_v = 64, W_O; wall time.
    ("heads h = 8, 2 threads vs 1, T = 1024", "heads_h8/f32/attn/1024", "heads_h8/f32/one/1024", 0.6),
    ("heads h = 1, 2 threads vs 1, T = 1024", "heads_h1/f32/attn/1024", "heads_h1/f32/one/1024", None),
    ("heads backward h = 8, 2 threads vs 1, T = 1024", "heads_backward_threads_h8/f32/attn/1024",
     "heads_backward_threads_h8/f32/one/1024", None),
    ("heads backward vs forward, h = 8, T = 1024", "heads_backward_h8/f32/attn/1024",
     "heads_backward_h8/f32/forward/1024", None),
]


def targets_table(results):
    """Markdown table of TARGETS, one column per (label, best) in results; a cell is the ratio,
    with "✗" where it exceeds the bound, "–" where a benchmark did not run."""
    out = ["| target (float unless said; bound) | " + " | ".join(r[0] for r in results) + " |",
           "|---|" + "---:|" * len(results)]
    for label, num, den, bound in TARGETS:
        cells = []
        for _, best in results:
            if num in best and den in best and best[den] > 0:
                ratio = best[num] / best[den]
                missed = bound is not None and ratio > bound
                # a miss that two decimals would show as the bound itself gets a third
                text = "%.3f" % ratio if missed and "%.2f" % ratio == "%.2f" % bound else "%.2f" % ratio
                cells.append(text + (" ✗" if missed else ""))
            else:
                cells.append("–")
        bound_text = " (≤ %g)" % bound if bound is not None else ""
        out.append("| " + label + bound_text + " | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def build(name, cxx, flags, jobs):
    build_dir = os.path.join(ROOT, "build", "bench-" + name)
    run(["cmake", "--preset", "bench", "-B", build_dir, "-DCMAKE_CXX_COMPILER=" + cxx,
         "-DATTN_BENCH_FLAGS=" + flags], cwd=ROOT, stdout=subprocess.DEVNULL)
    run(["cmake", "--build", build_dir, "-j", str(jobs)], cwd=ROOT, stdout=subprocess.DEVNULL)
    return build_dir


def targets_filter():
    """A --benchmark_filter that matches exactly the benchmarks TARGETS names."""
    names = sorted({name for _, num, den, _ in TARGETS for name in (num, den)})
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def run_binary(path, args, json_dir):
    cmd = [path, "--benchmark_format=json",
           "--benchmark_min_time=%g" % args.min_time,
           "--benchmark_repetitions=%d" % args.repetitions,
           "--benchmark_enable_random_interleaving=true"]
    if args.filter_benchmarks:
        cmd.append("--benchmark_filter=" + args.filter_benchmarks)
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    if json_dir:
        os.makedirs(json_dir, exist_ok=True)
        with open(os.path.join(json_dir, os.path.basename(path) + ".json"), "w") as f:
            f.write(out)
    # a filter that matches nothing in this binary: no JSON at all (Google Benchmark says so on
    # stderr and exits 0)
    return json.loads(out) if out.strip() else {"benchmarks": []}


def fastest(results):
    """{name: time in ns} keeping the fastest repetition of each benchmark: its CPU time, or its
    wall time for a benchmark that measures that (Google Benchmark's UseRealTime, whose name ends
    in /real_time, which is left off the name here: threaded ones)."""
    unit = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    best = {}
    for b in results["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = b.get("run_name", b["name"])
        clock = "cpu_time"
        if name.endswith("/real_time"):
            name, clock = name[:-len("/real_time")], "real_time"
        t = b[clock] * unit[b.get("time_unit", "ns")]
        if name not in best or t < best[name]:
            best[name] = t
    return best


def fmt_time(ns):
    if ns < 1e3:
        return "%.1f ns" % ns
    if ns < 1e6:
        return "%.2f µs" % (ns / 1e3)
    return "%.2f ms" % (ns / 1e6)


def tables(best, level=3):
    """Markdown tables, one per kernel (a heading of the given level, then the table): rows
    (type, size), columns attn and attn/impl."""
    groups = {}  # kernel -> {(type, size): {impl: ns}}
    for name, t in best.items():
        parts = name.split("/")
        if len(parts) < 4:
            continue
        kernel, typ, impl, size = parts[0], parts[1], parts[2], "/".join(parts[3:])
        groups.setdefault(kernel, {}).setdefault((typ, size), {})[impl] = t
    out = []
    for kernel in sorted(groups):
        rows = groups[kernel]
        impls = set()
        for r in rows.values():
            impls.update(r)
        others = [i for i in IMPL_ORDER if i in impls] + sorted(
            i for i in impls if i not in IMPL_ORDER and i != "attn")
        out.append("%s %s\n" % ("#" * level, kernel))
        out.append("| type | size | attn | " + " | ".join("attn/" + o for o in others) + " |")
        out.append("|---|---|---:|" + "---:|" * len(others))

        def size_key(k):
            typ, size = k
            nums = [int(x) if x.isdigit() else x for x in re.split(r"[/:]", size)]
            return (typ, [(0, x) if isinstance(x, int) else (1, x) for x in nums])

        for key in sorted(rows, key=size_key):
            r = rows[key]
            cells = [key[0], key[1].replace("/", "×") if key[1].count("/") == 1 else key[1]]
            cells.append(fmt_time(r["attn"]) if "attn" in r else "–")
            for o in others:
                if "attn" in r and o in r and r[o] > 0:
                    cells.append("%.2f" % (r["attn"] / r[o]))
                else:
                    cells.append("–")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def find_binaries(build_dir, regex=None):
    """The benchmark executables build_dir/bench/bench_* whose names match regex; exits when
    there are none."""
    binaries = sorted(glob.glob(os.path.join(build_dir, "bench", "bench_*")))
    binaries = [b for b in binaries if os.path.isfile(b) and os.access(b, os.X_OK)
                and not b.endswith(".json")]
    if regex:
        binaries = [b for b in binaries if re.search(regex, os.path.basename(b))]
    if not binaries:
        sys.exit("no benchmark binaries in %s/bench (build them: cmake --workflow --preset bench)"
                 % build_dir)
    return binaries


def run_suite(build_dir, args, label):
    binaries = find_binaries(build_dir, args.filter)
    best = {}
    context = None
    for b in binaries:
        res = run_binary(b, args, args.json_dir and os.path.join(args.json_dir, label))
        context = dict(res.get("context", {}), **(context or {}))
        best.update(fastest(res))
    return best, context


def blas_note(context):
    """", OpenBLAS <version> (<kernel> kernels)" when a binary reported the OpenBLAS it ran
    (bench_sdpa's custom context), else ""."""
    if not context or "openblas_core" not in context:
        return ""
    return ", %s (%s kernels)" % (context.get("openblas_config", "OpenBLAS").split(" NO_")[0],
                                  context["openblas_core"])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def cache_value(build_dir, name, default=None):
    """A variable of build_dir's CMakeCache.txt, or default."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return default


def source_dir(build_dir):
    """The source tree a CMake build tree was configured from (ROOT when it does not say)."""
    return cache_value(build_dir, "CMAKE_HOME_DIRECTORY", ROOT)


def describe_build(build_dir):
    """"DIR: compiler, flags" from the build tree's CMake cache."""
    cxx = cache_value(build_dir, "CMAKE_CXX_COMPILER", "unknown compiler")
    return "%s: %s, %s" % (build_dir, cxx, cache_value(build_dir, "ATTN_BENCH_FLAGS", "") or
                           "no extra flags")


def commit_of(src):
    """Short commit of the git tree at src, "+ uncommitted changes" when include/ or the
    benchmarks' sources differ from it, or "unknown commit"."""
    git = ["git", "-C", src]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    if head.returncode != 0:
        return "unknown commit"
    dirty = subprocess.run(git + ["status", "--porcelain", "--", "include", "bench/*.cpp",
                                  "bench/*.hpp", "bench/CMakeLists.txt"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return head.stdout.strip() + (" + uncommitted changes" if dirty.strip() else "")


def tables_file(args, builds, results):
    """The text --write puts in its file: a generated-file header, the targets table and one
    collapsed section of tables per build. builds: [(label, description, build_dir, best)]."""
    command = "python3 bench/ratios.py " + shlex.join(sys.argv[1:])
    commits = sorted({commit_of(source_dir(d)) for _, _, d, _ in builds})
    out = ["<!-- Generated by bench/ratios.py: do not edit; run the command below again. -->",
           "# Benchmark tables (generated)", "",
           "Generated by `%s` on %s at commit %s. CPU: %s; one thread; time = fastest of %d "
           "interleaved repetitions of %g s (CPU time); ratios are attn's time over the other "
           "implementation's, same run. Prose and reading notes: "
           "[performance.md](performance.md)." % (
               command.strip(), datetime.date.today().isoformat(), ", ".join(commits),
               cpu_model(), args.repetitions, args.min_time), "",
           "## The targets (issues 5 and 21)", "", targets_table(results), "## Tables per build", ""]
    for label, description, _, best in builds:
        out += ["<details><summary>%s</summary>" % description, "", tables(best, level=4),
                "</details>", ""]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build", "bench"))
    p.add_argument("--matrix", action="store_true",
                   help="build and run g++/clang++ x native/AVX2 (build/bench-<name>)")
    p.add_argument("--configs", default=None,
                   help="with --matrix: comma-separated subset of " + ",".join(m[0] for m in MATRIX))
    p.add_argument("--filter", default=None, help="regex on binary names (bench_softmax, ...)")
    p.add_argument("--filter-benchmarks", default=None, help="Google Benchmark --benchmark_filter")
    p.add_argument("--min-time", type=float, default=0.02, help="seconds per repetition")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json-dir", default=None)
    p.add_argument("--write", default=None, metavar="FILE",
                   help="also write the targets and tables to FILE (replaced), e.g. "
                        "docs/performance-tables.md")
    args = p.parse_args()

    print("# attn benchmark ratios\n")
    print("CPU: %s; one thread; time = fastest of %d interleaved repetitions (CPU time).\n"
          % (cpu_model(), args.repetitions))
    results = []
    builds = []  # (label, description, build dir, best) for --write
    if args.matrix:
        wanted = args.configs.split(",") if args.configs else [m[0] for m in MATRIX]
        for name, cxx, flags in MATRIX:
            if name not in wanted:
                continue
            build_dir = build(name, cxx, flags, args.jobs)
            version = subprocess.run([cxx, "--version"], stdout=subprocess.PIPE,
                                     text=True).stdout.splitlines()[0]
            best, context = run_suite(build_dir, args, name)
            description = "%s: %s, %s%s" % (name, version, flags, blas_note(context))
            print("## %s\n" % description)
            print(tables(best))
            sys.stdout.flush()
            results.append((name, best))
            builds.append((name, description, build_dir, best))
    else:
        best, context = run_suite(args.build_dir, args, "default")
        description = describe_build(args.build_dir) + blas_note(context)
        print("## %s\n" % description)
        print(tables(best))
        results.append(("this build", best))
        builds.append(("this build", description, args.build_dir, best))
    print("## The targets (issues 5 and 21)\n")
    print(targets_table(results))
    if args.write:
        with open(args.write, "w") as f:
            f.write(tables_file(args, builds, results))
        print("wrote " + args.write, file=sys.stderr)


if __name__ == "__main__":
    main()
