#!/usr/bin/env python3
"""bench_model's tiny transformer in PyTorch, one thread, float32 (docs/performance.md, "The tiny
transformer"):

  python3 bench/torch_model.py [--repetitions 5] [--min-time 1]

The model is bench/model.cpp's: a GPT-2-style decoder (causal, learned positions, pre-LN blocks
with a final norm, GELU's tanh form, d_ff = 4·d_model, biases, the output tied to the token
embedding, LayerNorm ε = 1e-5), written as nanoGPT writes it (one Q/K/V linear, the causal mask
by masked_fill, softmax, no fused kernels: 1.13 has no scaled_dot_product_attention), at
(V, d_model, layers, heads, T) = (64, 64, 2, 4, 64) and (512, 256, 4, 8, 256). Timed (the fastest
of --repetitions rounds of ≥ --min-time seconds each):

  train_step       B = 4 sentences of T tokens: zero_grad, forward, F.cross_entropy (mean over
                   the B·T positions), backward, torch.optim.AdamW (two groups: the matrices with
                   weight decay 0.1, the biases and norms without; lr 1e-4)
  decode_uncached  B = 1: the forward over all T positions under torch.inference_mode()
  decode_cached    B = 1: one new token at position T − 1 with a hand-written key/value cache
                   holding T − 1 positions (preallocated tensors, written in place)

Printed: the wall time and the process's CPU time per call of the fastest round.
torch.set_num_threads(1) and set_num_interop_threads(1). Where `import torch` fails, the script
prints why and exits 0 having measured nothing (Debian: apt-get install python3-torch, 1.13 in
Debian 12; its module is /usr/bin/python3's, not a pyenv's).
"""
import argparse
import math
import sys
import time

SIZES = [(64, 64, 2, 4, 64), (512, 256, 4, 8, 256)]
BATCH = 4


def timed(fn, min_time, repetitions):
    """(wall, cpu) seconds per call of the fastest of `repetitions` rounds of ≥ min_time seconds
    (cpu: the process's CPU time, time.process_time, which a loaded machine does not inflate)."""
    fn()
    fn()  # warm: the allocator's pools, the kernels' first-call set-up
    rounds = []
    for _ in range(repetitions):
        calls, start, cpu = 0, time.perf_counter(), time.process_time()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        rounds.append((elapsed / calls, (time.process_time() - cpu) / calls))
    return min(rounds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=1.0)
    args = parser.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_model.py: PyTorch is not importable ({e}); nothing measured")
        return 0
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln_1 = nn.LayerNorm(d, eps=1e-5)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d, eps=1e-5)
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_fc_proj = nn.Linear(4 * d, d)

        def attention(self, x, cache=None, pos=0):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            if cache is not None:  # (B, h, capacity, d_k) each: append the new rows, read all
                kc, vc = cache
                kc[:, :, pos:pos + T] = k
                vc[:, :, pos:pos + T] = v
                k, v = kc[:, :, :pos + T], vc[:, :, :pos + T]
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            n = k.size(2)
            if T > 1:
                mask = torch.ones(T, n, dtype=torch.bool).tril(diagonal=n - T)
                att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

        def forward(self, x, cache=None, pos=0):
            x = x + self.attention(self.ln_1(x), cache, pos)
            return x + self.c_fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, V, d, L, h, T):
            super().__init__()
            self.wte = nn.Embedding(V, d)
            self.wpe = nn.Embedding(T, d)
            self.blocks = nn.ModuleList(Block(d, h) for _ in range(L))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
            nn.init.normal_(self.wte.weight, std=0.02)
            nn.init.normal_(self.wpe.weight, std=0.02)

        def forward(self, idx, caches=None, pos=0):
            T = idx.size(1)
            x = self.wte(idx) + self.wpe(torch.arange(pos, pos + T))
            for i, b in enumerate(self.blocks):
                x = b(x, None if caches is None else caches[i], pos)
            return self.ln_f(x) @ self.wte.weight.t()  # tied, no bias

    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} thread; ms per call, wall (CPU), the fastest "
          f"of {args.repetitions} rounds")
    for V, d, L, h, T in SIZES:
        name = f"{V}x{d}x{L}x{h}x{T}"
        model = GPT(V, d, L, h, T)
        g = torch.Generator().manual_seed(7)
        x = torch.randint(0, V, (BATCH, T), generator=g)
        y = torch.randint(0, V, (BATCH, T), generator=g)
        decayed = [p for p in model.parameters() if p.dim() >= 2]
        others = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                                 {"params": others, "weight_decay": 0.0}], lr=1e-4)

        def train_step():
            opt.zero_grad(set_to_none=False)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
            loss.backward()
            opt.step()

        one = torch.randint(0, V, (1, T), generator=g)

        def uncached():
            with torch.inference_mode():
                model(one)

        dk = d // h
        caches = [(torch.zeros(1, h, T, dk), torch.zeros(1, h, T, dk)) for _ in range(L)]
        with torch.inference_mode():
            model(one[:, :T - 1], caches, 0)  # the prompt: T − 1 positions cached
            # the cached step's logits equal the uncached forward's last row (a check, to rounding)
            full = model(one)[0, -1]
            step = model(one[:, T - 1:], caches, T - 1)[0, -1]
            err = (full - step).abs().max().item() / full.abs().max().item()
            if not err < 1e-5:
                print(f"{name}: the cached step's logits differ from the forward's ({err:.2e}); not timed")
                return 1

        def cached():
            with torch.inference_mode():
                model(one[:, T - 1:], caches, T - 1)  # rewrites row T − 1 of each cache

        t_train = timed(train_step, args.min_time, args.repetitions)
        t_unc = timed(uncached, args.min_time, args.repetitions)
        t_cac = timed(cached, args.min_time, args.repetitions)
        for what, (wall, cpu) in (("train_step", t_train), ("decode_uncached", t_unc), ("decode_cached", t_cac)):
            print(f"{what}/f32/torch/{name}: {wall * 1e3:.3f} ms ({cpu * 1e3:.3f} ms CPU)")
        print(f"  cached / uncached = 1/{t_unc[1] / t_cac[1]:.1f} (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
