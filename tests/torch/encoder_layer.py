#!/usr/bin/env python3
"""Numbers of PyTorch's nn.TransformerEncoderLayer for attn's mapping test (docs/block.md,
"From PyTorch's nn.TransformerEncoderLayer"): its state_dict, an input, the output, a fixed upstream
gradient and the gradients of the input and of every parameter, written to a text file that
tests/test_pytorch.cpp reads, maps to attn's block as docs/block.md says, and compares.

Two routes make the same file format:

  --route torch   PyTorch itself (Debian's python3-torch; 1.13 is Debian 12's): each layer made by
                  nn.TransformerEncoderLayer(d, nhead, d_ff, dropout=0, activation, layer_norm_eps,
                  batch_first=True, norm_first) from torch.manual_seed, its parameters moved off
                  their defaults (the zero biases and unit γ would hide a swapped block), run in
                  float32 and, as a copy, in float64; autograd gives the gradients. Where `import
                  torch` fails the script prints why and exits 77, which CTest reads as SKIPPED.
  --route python  No torch and no numpy: the layer's documented forward (PyTorch's
                  TransformerEncoderLayer._sa_block / _ff_block and F.multi_head_attention_forward,
                  written out below on PyTorch's own tensors: in_proj_weight's rows, weights d_out
                  × d_in) in float64, and its gradients by reverse-mode differentiation of those
                  scalar operations (not by attn's closed-form backward). Parameters and inputs are
                  float32 numbers from Python's random.Random(seed), so float and double runs of
                  attn read the same values. tests/torch/encoder_layer_python.txt is this route's
                  output, committed, so that the mapping is checked where torch is absent.

  python3 tests/torch/encoder_layer.py --route python --out tests/torch/encoder_layer_python.txt
  python3 tests/torch/encoder_layer.py --route python --out /dev/null --check-gradients
  python3 tests/torch/encoder_layer.py --route torch --out /tmp/torch.txt \\
      --check build/test/tests/attn_tests "pytorch: the file named by ATTN_TORCH_FIXTURE"

The format, one item per line: `route <text>`; `case <name> batch=B T=T d_model=d nhead=h
d_ff=f norm_first=0|1 activation=relu|gelu causal=0|1 eps=<e>`; then `tensor <name> <dims...>`
followed by one line of its numbers (row-major, Python's repr: a double that reads back exactly);
`end` closes a case. Names: the state_dict's keys, `input` (B·T × d, batch_first rows),
`grad_output` (dL/dY for L = sum(Y ⊙ grad_output)), and `<float32|float64>:output`,
`<float32|float64>:grad.input`, `<float32|float64>:grad.<state_dict key>`: the results in that
precision.
"""
import argparse
import math
import os
import random
import struct
import subprocess
import sys

STATE = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
         "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
         "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]

# (name, batch, T, d_model, nhead, d_ff, norm_first, activation, causal): both arrangements, both
# activations, causal or not, h = 1, 2, 3
PYTHON_CASES = [
    ("post_relu_h2", 2, 3, 6, 2, 8, False, "relu", False),
    ("post_gelu_h3_causal", 2, 3, 6, 3, 8, False, "gelu", True),
    ("pre_relu_h1_causal", 2, 3, 6, 1, 8, True, "relu", True),
    ("pre_gelu_h2", 2, 3, 6, 2, 8, True, "gelu", False),
]
TORCH_CASES = [
    ("post_relu_h2", 2, 5, 8, 2, 16, False, "relu", False),
    ("post_gelu_h4_causal", 2, 5, 8, 4, 16, False, "gelu", True),
    ("pre_relu_h1_causal", 2, 5, 8, 1, 16, True, "relu", True),
    ("pre_gelu_h2", 2, 5, 8, 2, 16, True, "gelu", False),
]
EPS = 1e-5


def shape_of(name, d, f):
    return {"self_attn.in_proj_weight": [3 * d, d], "self_attn.in_proj_bias": [3 * d],
            "self_attn.out_proj.weight": [d, d], "self_attn.out_proj.bias": [d],
            "linear1.weight": [f, d], "linear1.bias": [f], "linear2.weight": [d, f],
            "linear2.bias": [d], "norm1.weight": [d], "norm1.bias": [d], "norm2.weight": [d],
            "norm2.bias": [d]}[name]


def write_tensor(out, name, dims, values):
    out.write("tensor %s %s\n" % (name, " ".join(str(n) for n in dims)))
    out.write(" ".join(repr(float(v)) for v in values) + "\n")


# ---- the python route: scalar reverse-mode differentiation ------------------------------------

class Var:
    """A float64 number, the operations that made it and their local derivatives."""
    __slots__ = ("v", "g", "parents")

    def __init__(self, v, parents=()):
        self.v = v
        self.g = 0.0
        self.parents = parents  # ((Var, d self / d parent), ...)

    def __add__(self, o):
        o = lift(o)
        return Var(self.v + o.v, ((self, 1.0), (o, 1.0)))

    __radd__ = __add__

    def __sub__(self, o):
        o = lift(o)
        return Var(self.v - o.v, ((self, 1.0), (o, -1.0)))

    def __mul__(self, o):
        o = lift(o)
        return Var(self.v * o.v, ((self, o.v), (o, self.v)))

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = lift(o)
        return Var(self.v / o.v, ((self, 1.0 / o.v), (o, -self.v / (o.v * o.v))))


def lift(x):
    return x if isinstance(x, Var) else Var(float(x))


def vsum(xs):
    return Var(math.fsum(x.v for x in xs), tuple((x, 1.0) for x in xs))


def dot(xs, ys):
    return Var(math.fsum(x.v * y.v for x, y in zip(xs, ys)),
               tuple((x, y.v) for x, y in zip(xs, ys)) + tuple((y, x.v) for x, y in zip(xs, ys)))


def vexp(x):
    e = math.exp(x.v)
    return Var(e, ((x, e),))


def vsqrt(x):
    s = math.sqrt(x.v)
    return Var(s, ((x, 0.5 / s),))


def relu(x):
    return Var(x.v if x.v > 0 else 0.0, ((x, 1.0 if x.v > 0 else 0.0),))


def gelu(x):
    # F.gelu's default (approximate='none'): x·Φ(x), Φ(x) = ½(1 + erf(x/√2)); slope Φ(x) + x·φ(x)
    cdf = 0.5 * (1.0 + math.erf(x.v / math.sqrt(2.0)))
    pdf = math.exp(-0.5 * x.v * x.v) / math.sqrt(2.0 * math.pi)
    return Var(x.v * cdf, ((x, cdf + x.v * pdf),))


def backward(root):
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for p, _ in node.parents:
            if id(p) not in seen:
                stack.append((p, False))
    root.g = 1.0
    for node in reversed(order):
        for p, local in node.parents:
            p.g += node.g * local


def linear(rows, W, b):
    """nn.Linear: y = x Wᵀ + b, W (d_out × d_in) as PyTorch holds it (a list of its rows)."""
    return [[dot(x, w) + bo for w, bo in zip(W, b)] for x in rows]


def layer_norm(rows, gamma, beta, eps):
    out = []
    for x in rows:
        n = len(x)
        mu = vsum(x) / n
        dev = [xi - mu for xi in x]
        var = dot(dev, dev) / n  # biased, as nn.LayerNorm
        r = lift(1.0) / vsqrt(var + eps)
        out.append([dev[i] * r * gamma[i] + beta[i] for i in range(n)])
    return out


def self_attention(rows, in_w, in_b, out_w, out_b, nhead, causal):
    """F.multi_head_attention_forward for one sentence, query = key = value = rows: in_proj's rows
    [0, d) are q's weight, [d, 2d) k's, [2d, 3d) v's; head i has the columns [i·d_k, (i+1)·d_k);
    q is scaled by 1/√d_k; softmax over the keys (a causal mask drops keys after the query);
    the heads concatenated, then out_proj."""
    d = len(rows[0])
    dk = d // nhead
    q = linear(rows, in_w[0:d], in_b[0:d])
    k = linear(rows, in_w[d:2 * d], in_b[d:2 * d])
    v = linear(rows, in_w[2 * d:3 * d], in_b[2 * d:3 * d])
    scale = 1.0 / math.sqrt(dk)
    concat = [[None] * d for _ in rows]
    for i in range(nhead):
        cols = range(i * dk, (i + 1) * dk)
        for t in range(len(rows)):
            qt = [q[t][c] * scale for c in cols]
            keys = range(t + 1) if causal else range(len(rows))
            s = [dot(qt, [k[j][c] for c in cols]) for j in keys]
            m = max(x.v for x in s)  # a constant shift: softmax does not move
            e = [vexp(x - m) for x in s]
            total = vsum(e)
            w = [x / total for x in e]
            for c in cols:
                concat[t][c] = dot(w, [v[j][c] for j in keys])
    return linear(concat, out_w, out_b)


def encoder_layer(x, P, nhead, norm_first, act, causal, eps):
    """TransformerEncoderLayer.forward for one sentence (dropout 0)."""
    def sa(rows):
        return self_attention(rows, P["self_attn.in_proj_weight"], P["self_attn.in_proj_bias"],
                              P["self_attn.out_proj.weight"], P["self_attn.out_proj.bias"], nhead, causal)

    def ff(rows):
        h = linear(rows, P["linear1.weight"], P["linear1.bias"])
        h = [[act(z) for z in row] for row in h]
        return linear(h, P["linear2.weight"], P["linear2.bias"])

    def add(a, b):
        return [[ai + bi for ai, bi in zip(ra, rb)] for ra, rb in zip(a, b)]

    def ln(rows, k):
        return layer_norm(rows, P["norm%d.weight" % k], P["norm%d.bias" % k], eps)

    if norm_first:
        x = add(x, sa(ln(x, 1)))
        return add(x, ff(ln(x, 2)))
    x = ln(add(x, sa(x)), 1)
    return ln(add(x, ff(x)), 2)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def python_case(out, rng, name, batch, T, d, nhead, f, norm_first, act, causal):
    def numbers(n, sd, mean=0.0):
        return [f32(rng.gauss(mean, sd)) for _ in range(n)]

    flat = {}
    for key in STATE:
        dims = shape_of(key, d, f)
        n = math.prod(dims)
        if key.endswith("weight") and len(dims) == 2:
            flat[key] = numbers(n, 1.0 / math.sqrt(dims[1]))
        elif key.startswith("norm") and key.endswith("weight"):
            flat[key] = numbers(n, 0.2, 1.0)
        else:
            flat[key] = numbers(n, 0.2)
    x_flat = numbers(batch * T * d, 1.0)
    g_flat = numbers(batch * T * d, 1.0)

    P, leaves = {}, {}
    for key in STATE:
        dims = shape_of(key, d, f)
        vs = [Var(v) for v in flat[key]]
        leaves[key] = vs
        P[key] = [vs[r * dims[1]:(r + 1) * dims[1]] for r in range(dims[0])] if len(dims) == 2 else vs
    xs = [Var(v) for v in x_flat]
    fn = relu if act == "relu" else gelu
    ys = []
    for b in range(batch):
        rows = [xs[(b * T + t) * d:(b * T + t + 1) * d] for t in range(T)]
        ys.extend(z for row in encoder_layer(rows, P, nhead, norm_first, fn, causal, EPS) for z in row)
    backward(dot(ys, [Var(g) for g in g_flat]))

    out.write("case %s batch=%d T=%d d_model=%d nhead=%d d_ff=%d norm_first=%d activation=%s causal=%d eps=%r\n"
              % (name, batch, T, d, nhead, f, norm_first, act, causal, EPS))
    for key in STATE:
        write_tensor(out, key, shape_of(key, d, f), flat[key])
    write_tensor(out, "input", [batch * T, d], x_flat)
    write_tensor(out, "grad_output", [batch * T, d], g_flat)
    write_tensor(out, "float64:output", [batch * T, d], [y.v for y in ys])
    write_tensor(out, "float64:grad.input", [batch * T, d], [v.g for v in xs])
    for key in STATE:
        write_tensor(out, "float64:grad." + key, shape_of(key, d, f), [v.g for v in leaves[key]])
    out.write("end\n")


def check_gradients(seed):
    """The python route's reverse-mode gradients against central differences (h = 1e-6) of its
    own forward, every third entry of every tensor, on each case's shapes and settings; returns
    the largest |difference| (central differences' own error is about 1e-9 here)."""
    rng = random.Random(seed)
    worst = 0.0
    for (_, batch, T, d, nhead, f, norm_first, act, causal) in PYTHON_CASES:
        flat = {key: [rng.gauss(1.0 if key.startswith("norm") and key.endswith("weight") else 0.0, 0.5)
                      for _ in range(math.prod(shape_of(key, d, f)))] for key in STATE}
        flat["input"] = [rng.gauss(0, 1) for _ in range(batch * T * d)]
        g = [rng.gauss(0, 1) for _ in range(batch * T * d)]
        fn = relu if act == "relu" else gelu

        def loss():
            P, leaves = {}, {}
            for key in STATE + ["input"]:
                vs = [Var(v) for v in flat[key]]
                leaves[key] = vs
                dims = shape_of(key, d, f) if key != "input" else [batch * T, d]
                P[key] = [vs[r * dims[1]:(r + 1) * dims[1]] for r in range(dims[0])] if len(dims) == 2 else vs
            ys = []
            for b in range(batch):
                rows = P["input"][b * T:(b + 1) * T]
                ys.extend(z for row in encoder_layer(rows, P, nhead, norm_first, fn, causal, EPS) for z in row)
            L = dot(ys, [Var(v) for v in g])
            backward(L)
            return L.v, leaves

        _, leaves = loss()
        for key in STATE + ["input"]:
            for i in range(0, len(flat[key]), 3):
                old, h = flat[key][i], 1e-6
                flat[key][i] = old + h
                up = loss()[0]
                flat[key][i] = old - h
                down = loss()[0]
                flat[key][i] = old
                worst = max(worst, abs((up - down) / (2 * h) - leaves[key][i].g))
    return worst


# ---- the torch route --------------------------------------------------------------------------

def torch_case(out, torch, seed, name, batch, T, d, nhead, f, norm_first, act, causal):
    import copy
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d, nhead, f, dropout=0.0, activation=act, layer_norm_eps=EPS,
                                             batch_first=True, norm_first=norm_first)
    with torch.no_grad():  # off the defaults: zero biases and unit γ would hide a swapped block
        for p in layer.parameters():
            p.add_(0.2 * torch.randn_like(p))
    x = torch.randn(batch, T, d)
    g = torch.randn(batch, T, d)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if causal else None  # True: may not attend
    out.write("case %s batch=%d T=%d d_model=%d nhead=%d d_ff=%d norm_first=%d activation=%s causal=%d eps=%r\n"
              % (name, batch, T, d, nhead, f, norm_first, act, causal, EPS))
    state = layer.state_dict()
    for key in STATE:
        write_tensor(out, key, list(state[key].shape), state[key].flatten().tolist())
    write_tensor(out, "input", [batch * T, d], x.flatten().tolist())
    write_tensor(out, "grad_output", [batch * T, d], g.flatten().tolist())
    for tag, lay, dtype in (("float32", layer, torch.float32), ("float64", copy.deepcopy(layer).double(), torch.float64)):
        lay.train()  # (dropout is 0; training mode keeps PyTorch off its inference fast path)
        xi = x.to(dtype).clone().requires_grad_(True)
        y = lay(xi, src_mask=mask)
        (y * g.to(dtype)).sum().backward()
        write_tensor(out, tag + ":output", [batch * T, d], y.detach().flatten().tolist())
        write_tensor(out, tag + ":grad.input", [batch * T, d], xi.grad.flatten().tolist())
        params = dict(lay.named_parameters())
        for key in STATE:
            write_tensor(out, tag + ":grad." + key, list(params[key].shape), params[key].grad.flatten().tolist())
    out.write("end\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--route", choices=["torch", "python"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--check-gradients", action="store_true",
                    help="print the python route's largest |reverse mode - central differences| and stop")
    ap.add_argument("--check", nargs=2, metavar=("TEST_BINARY", "TEST_NAME"),
                    help="then run TEST_BINARY TEST_NAME with ATTN_TORCH_FIXTURE=OUT, and return its status")
    args = ap.parse_args()
    if args.check_gradients:
        worst = check_gradients(args.seed)
        print("largest |reverse mode - central differences|: %.3g" % worst)
        return 0 if worst < 1e-6 else 1
    if args.route == "torch":
        try:
            import torch
        except ImportError as e:
            print("SKIPPED: %s cannot import torch (%s): PyTorch's own numbers are not compared here. "
                  "Install Debian's python3-torch to run this test; the committed pure-Python fixture "
                  "(tests/torch/encoder_layer_python.txt) is still checked by attn_tests."
                  % (sys.executable, e))
            return 77
        torch.set_num_threads(1)
        with open(args.out, "w") as out:
            out.write("route torch %s (float32 and float64; autograd)\n" % torch.__version__)
            for k, case in enumerate(TORCH_CASES):
                torch_case(out, torch, args.seed + k, *case)
    else:
        rng = random.Random(args.seed)
        with open(args.out, "w") as out:
            out.write("route python float64 (tests/torch/encoder_layer.py --route python --seed %d: "
                      "PyTorch's documented forward, reverse-mode gradients; no torch)\n" % args.seed)
            for case in PYTHON_CASES:
                python_case(out, rng, *case)
    print("wrote", args.out)
    if args.check:
        env = dict(os.environ, ATTN_TORCH_FIXTURE=os.path.abspath(args.out))
        return subprocess.call([args.check[0], args.check[1]], env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
