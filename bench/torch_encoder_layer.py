#!/usr/bin/env python3
"""PyTorch's nn.TransformerEncoderLayer on bench_block's shapes, one thread, float32, beside attn
(docs/performance.md, "PyTorch's TransformerEncoderLayer"):

  python3 bench/torch_encoder_layer.py [--attn build/b/bench/bench_block] [--heads build/b/bench/bench_heads]
                                       [--repetitions 5]

The layer is nn.TransformerEncoderLayer(d, h, d_ff, dropout=0, activation="gelu",
batch_first=True), post-LN (norm_first=False), as bench_block's attn block (which has no biases;
PyTorch's layer always has them: T·(4d + d_ff) additions more), on one sentence of T rows,
(T, d, d_ff, h) = (128, 64, 256, 4) and (1024, 512, 2048, 8). Timed (wall time, the fastest and
the median of --repetitions rounds, each round as many calls as fill --min-time seconds):

  forward/inference   layer.eval() under torch.inference_mode(): PyTorch's fused fast path
                      (torch._transformer_encoder_layer_fwd where the build has it)
  forward/autograd    layer.train() (dropout 0), the graph kept for a backward
  forward+backward    forward/autograd, then (Y·G).sum().backward(): ∂L/∂X and every .grad
  backward            forward+backward − forward/autograd (attn's block_backward times the
                      backward alone, after its forward)

torch.set_num_threads(1) and set_num_interop_threads(1). glibc's malloc would return PyTorch's
large freed blocks to the system and take them back as page faults on every call; the script
runs with MALLOC_MMAP_THRESHOLD_=33554432 (32 MiB, the largest glibc accepts),
MALLOC_TRIM_THRESHOLD_=4294967296 and MALLOC_TOP_PAD_=268435456 set (it re-executes itself with
them where the environment does not already set them, and prints the values used), as issue 29
asks for PyTorch's and Eigen's numbers on these VMs.

With --attn BENCH_BLOCK, bench_block's block/f32/attn/* and block_backward/f32/attn/* run in the
same session (one thread) and the ratios attn / PyTorch are printed.

Where `import torch` fails, the script prints why and exits 0 having measured nothing (Debian:
apt-get install python3-torch; 1.13 in Debian 12).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MALLOC = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296",
          "MALLOC_TOP_PAD_": "268435456"}
SHAPES = [(128, 64, 256, 4), (1024, 512, 2048, 8)]


def timed(fn, min_time, repetitions):
    """(fastest, median) seconds per call over `repetitions` rounds of ≥ min_time seconds."""
    fn()
    fn()  # warm: the allocator's pools, the kernels' first-call set-up
    per_call = []
    for _ in range(repetitions):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        per_call.append(elapsed / calls)
    return min(per_call), statistics.median(per_call)


def measure_torch(torch, args):
    results = {}
    for (T, d, dff, h) in SHAPES:
        torch.manual_seed(90)
        layer = torch.nn.TransformerEncoderLayer(d, h, dff, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=False)
        x = torch.rand(1, T, d) - 0.5
        g = torch.rand(1, T, d) - 0.5
        key = "%dx%dx%dx%d" % (T, d, dff, h)

        layer.eval()

        def inference():
            with torch.inference_mode():
                layer(x)

        results[(key, "forward/inference")] = timed(inference, args.min_time, args.repetitions)

        layer.train()
        xg = x.clone().requires_grad_(True)

        def forward():
            layer(xg)

        def forward_backward():
            layer.zero_grad(set_to_none=False)
            xg.grad = None
            (layer(xg) * g).sum().backward()

        results[(key, "forward/autograd")] = timed(forward, args.min_time, args.repetitions)
        results[(key, "forward+backward")] = timed(forward_backward, args.min_time, args.repetitions)
        fb, fa = results[(key, "forward+backward")], results[(key, "forward/autograd")]
        results[(key, "backward")] = (fb[0] - fa[0], fb[1] - fa[1])
    return results


def measure_torch_heads(torch, args):
    """nn.MultiheadAttention(512, 8, bias=True, batch_first=True), self-attention at T = 1024:
    bench_heads' shape (attn's benchmark has no biases)."""
    torch.manual_seed(91)
    mha = torch.nn.MultiheadAttention(512, 8, dropout=0.0, bias=True, batch_first=True)
    x = torch.rand(1, 1024, 512) - 0.5
    g = torch.rand(1, 1024, 512) - 0.5
    results = {}
    mha.eval()

    def inference():
        with torch.inference_mode():
            mha(x, x, x, need_weights=False)

    results["forward/inference"] = timed(inference, args.min_time, args.repetitions)
    mha.train()
    xg = x.clone().requires_grad_(True)

    def forward():
        mha(xg, xg, xg, need_weights=False)

    def forward_backward():
        mha.zero_grad(set_to_none=False)
        xg.grad = None
        (mha(xg, xg, xg, need_weights=False)[0] * g).sum().backward()

    results["forward/autograd"] = timed(forward, args.min_time, args.repetitions)
    results["forward+backward"] = timed(forward_backward, args.min_time, args.repetitions)
    return results


def measure_attn_heads(path, args):
    """{'forward'|'backward': (fastest, median) seconds} of bench_heads' h = 8, T = 1024, one thread."""
    out = subprocess.run([path, "--benchmark_filter=^heads(_backward)?_h8/f32/(one|attn)/1024",
                          "--benchmark_format=json", "--benchmark_min_time=%g" % args.min_time,
                          "--benchmark_repetitions=%d" % args.repetitions],
                         check=True, capture_output=True, text=True).stdout
    times = {}
    for b in json.loads(out[out.index("{"):])["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        kind, _, who = b["run_name"].split("/")[:3]
        what = "forward" if kind == "heads_h8" and who == "one" else "backward" if kind == "heads_backward_h8" and who == "attn" else None
        if what is None:
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        times.setdefault(what, []).append(b["real_time"] * scale)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def measure_attn(path, args):
    """{(shape, 'forward'|'backward'): (fastest, median) seconds} from bench_block's JSON."""
    out = subprocess.run([path, "--benchmark_filter=^block(_backward)?/f32/attn/",
                          "--benchmark_format=json", "--benchmark_min_time=%g" % args.min_time,
                          "--benchmark_repetitions=%d" % args.repetitions],
                         check=True, capture_output=True, text=True).stdout
    times = {}
    for b in json.loads(out[out.index("{"):])["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        kind, _, _, shape = b["run_name"].split("/")[:4]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        times.setdefault((shape, "forward" if kind == "block" else "backward"), []).append(b["real_time"] * scale)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attn", help="bench_block, to run in the same session and print the ratios")
    ap.add_argument("--heads", help="bench_heads: PyTorch's nn.MultiheadAttention (T = 1024, d 512, h = 8) "
                    "beside attn's multi_head_attention, in the same session")
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--repetitions", type=int, default=5)
    args = ap.parse_args()
    missing = {k: v for k, v in MALLOC.items() if k not in os.environ}
    if missing:  # glibc reads them when the process starts: start again with them
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **missing))
    try:
        import torch
    except ImportError as e:
        print("SKIPPED: %s cannot import torch (%s): nothing measured. Install Debian's "
              "python3-torch (1.13) to measure PyTorch's TransformerEncoderLayer." % (sys.executable, e))
        return 0
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # (already set once in this process)
    print("torch %s, %d thread(s); %s" % (torch.__version__, torch.get_num_threads(),
                                         ", ".join("%s=%s" % (k, os.environ[k]) for k in MALLOC)))
    print(torch.__config__.parallel_info().splitlines()[0] if hasattr(torch, "__config__") else "")
    torch_times = measure_torch(torch, args)
    attn_times = measure_attn(args.attn, args) if args.attn else {}
    print("\n| (T, d, d_ff, h) | what | PyTorch fastest (ms) | median (ms) | attn fastest (ms) | attn / PyTorch |")
    print("|---|---|---|---|---|---|")
    for (shape, what), (fast, med) in torch_times.items():
        attn_key = {"forward/inference": "forward", "forward/autograd": "forward", "backward": "backward"}.get(what)
        a = attn_times.get((shape, attn_key)) if attn_key else None
        print("| %s | %s | %.3f | %.3f | %s | %s |" % (shape, what, fast * 1e3, med * 1e3,
                                                      "%.3f" % (a[0] * 1e3) if a else "—",
                                                      "%.2f" % (a[0] / fast) if a else "—"))
    if args.heads:
        th = measure_torch_heads(torch, args)
        ah = measure_attn_heads(args.heads, args)
        print("\n| self-attention, T = 1024, d 512, h = 8 | PyTorch fastest (ms) | median (ms) | attn fastest (ms) | attn / PyTorch |")
        print("|---|---|---|---|---|")
        rows = [("forward/inference", ah.get("forward")), ("forward/autograd", ah.get("forward")),
                ("forward+backward", (ah["forward"][0] + ah["backward"][0], 0) if "forward" in ah and "backward" in ah else None)]
        for what, a in rows:
            fast, med = th[what]
            print("| %s | %.3f | %.3f | %s | %s |" % (what, fast * 1e3, med * 1e3, "%.3f" % (a[0] * 1e3) if a else "—",
                                                     "%.2f" % (a[0] / fast) if a else "—"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
