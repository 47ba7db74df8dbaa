#!/usr/bin/env python3
"""PyTorch's numbers for attn's training pieces (docs/training.md): torch.nn.functional.cross_entropy
(reduction 'mean' and 'none', ignore_index, the gradient by autograd), torch.optim.SGD (momentum,
dampening, nesterov, weight decay), torch.optim.AdamW and torch.nn.utils.clip_grad_norm_, in
float32 and float64, on inputs this script makes from a formula and writes beside the results.
tests/test_training.cpp's hidden test case "pytorch: the training file named by
ATTN_TORCH_FIXTURE" reads the file, runs attn on the same inputs and compares.

  python3 tests/torch/training.py --out /tmp/training.txt \\
      --check build/test/tests/attn_tests "pytorch: the training file named by ATTN_TORCH_FIXTURE"

Where `import torch` fails the script says why and exits 77 (CTest: skipped).

The format, one item per line: `<name> <count> <numbers...>`, each number as Python's repr of a
float (a float32 result widened to float64 exactly)."""
import argparse
import math
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", nargs=2, metavar=("EXE", "TEST"))
    args = ap.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any failure to import means: no torch here
        print(f"training.py: cannot import torch ({e}): skipped")
        return 77
    torch.set_num_threads(1)
    lines = []

    def put(name, values):
        vals = [float(v) for v in values]
        lines.append(name + " " + str(len(vals)) + " " + " ".join(repr(v) for v in vals))

    # cross-entropy: 5 positions, 7 tokens; row 3 sits at 1e4 (float32 holds it: 1e4 + k/4)
    T, V = 5, 7
    logits = [[3 * math.sin(1.3 * (t * V + j) + 0.4) for j in range(V)] for t in range(T)]
    logits[3] = [1e4 + 0.25 * j for j in range(V)]
    targets = [3, -100, 0, 6, 2]
    put("ce_logits", [x for row in logits for x in row])
    for dtype, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
        for ignore, itag in ((-100, ""), (2, "_ignore2")):
            ts = targets if ignore == -100 else [2 if t == -100 else t for t in targets]
            if tag == "f64":
                put(f"ce{itag}_targets", ts)
            tt = torch.tensor(ts)
            z = torch.tensor(logits, dtype=dtype, requires_grad=True)
            loss = torch.nn.functional.cross_entropy(z, tt, ignore_index=ignore)
            loss.backward()
            none = torch.nn.functional.cross_entropy(z.detach(), tt, ignore_index=ignore, reduction="none")
            put(f"ce{itag}_mean_{tag}", [loss.item()])
            put(f"ce{itag}_none_{tag}", none.tolist())
            put(f"ce{itag}_grad_{tag}", z.grad.flatten().tolist())

    # optimizers: 6 parameters, 5 steps, gradients from a formula of the step (not of p)
    n, steps = 6, 5
    p0 = [0.5 * i - 1.2 for i in range(n)]
    grads = [[math.sin(0.7 * k + 1.1 * i) + 0.2 * i for i in range(n)] for k in range(steps)]
    put("opt_p0", p0)
    put("opt_grads", [g for row in grads for g in row])
    sgd_cases = {
        "sgd_plain": dict(lr=0.1),
        "sgd_momentum": dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
        "sgd_nesterov": dict(lr=0.02, momentum=0.8, weight_decay=0.1, nesterov=True),
    }
    adamw_cases = {
        "adamw_default": dict(),
        "adamw_custom": dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    }
    for dtype, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
        for name, kw in list(sgd_cases.items()) + list(adamw_cases.items()):
            p = torch.nn.Parameter(torch.tensor(p0, dtype=dtype))
            opt = (torch.optim.SGD if name.startswith("sgd") else torch.optim.AdamW)([p], foreach=False, **kw)
            for k in range(steps):
                p.grad = torch.tensor(grads[k], dtype=dtype)
                opt.step()
            put(f"{name}_p_{tag}", p.detach().tolist())
            st = opt.state[p]
            if "momentum_buffer" in st and st["momentum_buffer"] is not None:
                put(f"{name}_b_{tag}", st["momentum_buffer"].tolist())
            if "exp_avg" in st:
                put(f"{name}_m_{tag}", st["exp_avg"].tolist())
                put(f"{name}_v_{tag}", st["exp_avg_sq"].tolist())

    # clip_grad_norm_: two buffers, clipped (max_norm 1) and not (max_norm 100)
    g1 = [0.3, -1.2, 2.5]
    g2 = [0.7, 0.1]
    put("clip_g1", g1)
    put("clip_g2", g2)
    for dtype, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
        for max_norm, mtag in ((1.0, "1"), (100.0, "100")):
            a = torch.nn.Parameter(torch.zeros(3, dtype=dtype))
            b = torch.nn.Parameter(torch.zeros(2, dtype=dtype))
            a.grad = torch.tensor(g1, dtype=dtype)
            b.grad = torch.tensor(g2, dtype=dtype)
            total = torch.nn.utils.clip_grad_norm_([a, b], max_norm)
            put(f"clip{mtag}_total_{tag}", [total.item()])
            put(f"clip{mtag}_grads_{tag}", a.grad.tolist() + b.grad.tolist())

    with open(args.out, "w") as f:
        f.write(f"route torch {torch.__version__}\n")
        f.write("\n".join(lines) + "\n")
    if args.check:
        env = dict(os.environ, ATTN_TORCH_FIXTURE=os.path.abspath(args.out))
        return subprocess.call([args.check[0], args.check[1]], env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
