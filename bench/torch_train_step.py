#!/usr/bin/python3
"""The parity model's training step in PyTorch: the figure `aoc bench --torch-step` compares its own
trainer against (docs/bench.md, "Training").

The model is aoc's (models/mamba2.cpp, scenarios/train/parity-implicit.json): one implicit Mamba2
layer, d_model 32, d_state 8, expand 2, headdim 16, d_conv 4, vocabulary 2, tied embeddings, the
injection u = W rmsnorm(e) + b added to the in-projection, the body rmsnorm(z + out_proj(...)).
The selective scan is Mamba2's minimal SSD (one chunk of the whole sequence: decays by a segment
sum, then one einsum), the way it is written for PyTorch. Batch 64 sequences of 32 tokens.

A bounded step: z = f(0), three damped steps z <- 0.2 z + 0.8 f(z), the loss, backward, the
gradient clipped to norm 1, AdamW. A free step: 16 undamped steps without gradients (each
sample's best iterate kept, as aoc's solve does), four damped steps with gradients (the phantom
gradient), then as above. aoc bench's cell runs the same two steps (its solve tolerance set out of
reach, so that both take 16 gradient-free steps).

Prints one JSON object: seconds per step (the median of --steps after --warmup), per precision,
with the torch version and thread count. Exits 3 with a one-line message where torch is missing.
"""
import argparse
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # PyTorch is optional
    print(f"torch_train_step: PyTorch is not installed ({e}); apt install python3-torch", file=sys.stderr)
    sys.exit(3)

D, N, EXPAND, HEADDIM, K, VOCAB = 32, 8, 2, 16, 4, 2
DI = EXPAND * D
H = DI // HEADDIM
P = HEADDIM
IN_PROJ = 2 * DI + 2 * N + H
TAU, UNROLL, SOLVE, PHANTOM = 0.8, 4, 16, 4


def rmsnorm(x, g, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def segsum(x):
    """x [..., T] -> [..., T, T]: sum of x over (j, i] below the diagonal, -inf above."""
    T = x.size(-1)
    xr = x.unsqueeze(-1).expand(*x.shape, T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    xr = xr.masked_fill(~mask, 0)
    out = torch.cumsum(xr, dim=-2)
    return out.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0), -torch.inf)


class Parity(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        t = dict(dtype=dtype)
        r = lambda *s, scale=1.0: torch.nn.Parameter(scale * (2 * torch.rand(*s, **t) - 1))
        self.embedding = r(VOCAB, D, scale=0.5)
        self.inj_norm = torch.nn.Parameter(torch.ones(D, **t))
        self.inj_W = r(IN_PROJ, D, scale=D ** -0.5)
        self.inj_b = torch.nn.Parameter(torch.zeros(IN_PROJ, **t))
        self.norm = torch.nn.Parameter(torch.ones(D, **t))
        self.in_proj = r(IN_PROJ, D, scale=D ** -0.5)
        self.conv_w = r(DI + 2 * N, K, scale=0.5)
        self.conv_b = r(DI + 2 * N, scale=0.1)
        self.dt_bias = torch.nn.Parameter(torch.full((H,), -2.0, **t))
        self.A_log = torch.nn.Parameter(torch.log(torch.arange(1, H + 1, **t)))
        self.Dskip = torch.nn.Parameter(torch.ones(H, **t))
        self.gate_norm = torch.nn.Parameter(torch.ones(DI, **t))
        self.out_proj = r(D, DI, scale=DI ** -0.5)
        self.norm_f = torch.nn.Parameter(torch.ones(D, **t))

    def inject(self, e):
        return F.linear(rmsnorm(e, self.inj_norm), self.inj_W, self.inj_b)

    def body(self, z, u):
        Bsz, L, _ = z.shape
        p = F.linear(rmsnorm(z, self.norm), self.in_proj) + u
        g, xbc, dt = p.split([DI, DI + 2 * N, H], dim=-1)
        xbc = F.silu(F.conv1d(F.pad(xbc.transpose(1, 2), (K - 1, 0)), self.conv_w.unsqueeze(1), self.conv_b, groups=DI + 2 * N).transpose(1, 2))
        x, Bm, Cm = xbc.split([DI, N, N], dim=-1)
        delta = F.softplus(dt + self.dt_bias)                 # [B, L, H]
        logA = delta * -torch.exp(self.A_log)                  # log of the decay a = exp(delta A)
        xh = x.view(Bsz, L, H, P)
        Ls = torch.exp(segsum(logA.transpose(1, 2)))           # [B, H, L, L]
        M = torch.einsum("bln,bsn->bls", Cm, Bm).unsqueeze(1) * Ls  # [B, H, L, L]: C_l . B_s, decayed from s to l
        y = torch.einsum("bhls,bshp->blhp", M, xh * delta.unsqueeze(-1))
        y = (y + xh * self.Dskip.view(1, 1, H, 1)).reshape(Bsz, L, DI)
        yn = rmsnorm(y * F.silu(g), self.gate_norm)
        return rmsnorm(z + F.linear(yn, self.out_proj), self.norm_f)

    def head(self, z):
        return F.linear(z, self.embedding)


def batch(B, L, gen):
    tokens = torch.randint(0, 2, (B, L), generator=gen)
    return tokens, torch.cumsum(tokens, 1) % 2


def step(m, opt, tokens, targets, free):
    opt.zero_grad(set_to_none=True)
    u = m.inject(F.embedding(tokens, m.embedding))
    if not free:
        z = m.body(torch.zeros(*tokens.shape, D, dtype=u.dtype), u)
        for _ in range(UNROLL - 1):
            z = (1 - TAU) * z + TAU * m.body(z, u)
    else:
        with torch.no_grad():
            uz = u.detach()
            z = torch.zeros(*tokens.shape, D, dtype=u.dtype)
            best, best_rel = z, torch.full((tokens.shape[0],), float("inf"), dtype=u.dtype)
            for _ in range(SOLVE):
                fz = m.body(z, uz)
                rel = (fz - z).flatten(1).norm(dim=1) / (fz.flatten(1).norm(dim=1) + 1e-9)
                better = rel < best_rel
                best = torch.where(better.view(-1, 1, 1), fz, best)
                best_rel = torch.minimum(rel, best_rel)
                z = fz
            z = best
        for _ in range(PHANTOM):
            z = (1 - TAU) * z + TAU * m.body(z, u)
    loss = F.cross_entropy(m.head(z).reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10, help="timed steps of each kind (the median counts)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    out = {"tool": "bench/torch_train_step.py", "torch": torch.__version__, "threads": a.threads, "batch": a.batch, "length": a.length,
           "steps": a.steps, "solve_steps": SOLVE, "unroll": UNROLL, "phantom": PHANTOM, "seconds_per_step": {}}
    for name, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        m = Parity(dtype)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
        out["parameters"] = sum(p.numel() for p in m.parameters())
        for kind, free in (("bounded", False), ("free", True)):
            times = []
            for k in range(a.warmup + a.steps):
                tokens, targets = batch(a.batch, a.length, gen)
                t0 = time.perf_counter()
                step(m, opt, tokens, targets, free)
                if k >= a.warmup:
                    times.append(time.perf_counter() - t0)
            out["seconds_per_step"].setdefault(name, {})[kind] = statistics.median(times)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
