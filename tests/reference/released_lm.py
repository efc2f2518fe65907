#!/usr/bin/python3
"""An independent float64 reference of the released implicit language models.

microsoft/implicit_languagemodels (implicit_llm/): ImplicitMambaForCausalLM and
ImplicitLlamaForCausalLM in evaluation mode, written from the released code's equations in numpy
(no torch; nothing shared with aoc). Used by tests/reference/run_released.py to check aoc's import,
compile and backends against the released models (issue 14).

What it follows, from the released sources (paths under implicit_llm/):

* the model classes (implicit_mamba2/modeling_mamba2.py, implicit_llama/modeling_llama.py):
  e = word_emb(ids) (no projection, d_embed == d_model), backbone, tied head
  logits = z E^T (PartialCrossEntropyHead's decoder shares the embedding, no bias). Mamba2's
  vocabulary is n_tokens padded up to a multiple of pad_vocab_size_multiple when pad_vocab; Llama's
  is vocab_size (padded the same way when pad_vocab).
* the implicit backbone (backbones.py ImplicitModel, implicit.py ImplicitMixin): u =
  injection(injection_norm(e)) (a Linear with bias after an RMSNorm, eps 1e-5), computed once; the
  DEQ function f(z; u) = norm_f(Block_n(... Block_1(z; u))); in evaluation mode every forward runs
  _sequential_step:

      z = 0
      for count in range(f_thres - 1):
          z_next = f(z)                                   # the stateful ops do not commit
          diff = ||z_next - z|| / (1e-6 + ||z||)          # one number, norms over the whole tensor
          z = (1 - tau) z + tau z_next
          if diff < f_tol: break
      output = f(z)                                       # the final call, which commits the caches

  with f_thres = eval_f_max_iter if > 0 else int(f_max_iter * eval_factor), f_tol =
  solver.f_tol, tau = training.tau (ema_alpha is None in every released config).
* torchdeq's weight norm on every nn.Linear / nn.Conv1d of the implicit backbone: W = V g / ||V||,
  the norm over all axes but the first (g is weight_g, or norm_target_norm with norm_no_scale).
* Block (modules/block.py), pre-norm: z1 = z + mixer(RMSNorm(z), u); with an MLP
  z2 = z1 + mlp(RMSNorm2(z1)); RMSNorm(x) = x / sqrt(mean(x^2) + 1e-5) * w.
* Mamba2 (modules/mamba2.py), ngroups 1, d_ssm = d_inner = expand d_model, no MLP part:
  zxbcdt = in_proj(n) + u, split [z, xBC, dt]; xBC = SiLU(causal depthwise conv(xBC) + b);
  split [x, B, C]; dt = softplus(dt + dt_bias); A = -exp(A_log);
  h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T; y_t = h_t C_t + D x_t;
  y = RMSNormGated(y, z) = RMSNorm(y * SiLU(z)) * w (norm_before_gate False, one group, eps 1e-5);
  out_proj(y). Two code paths, as released: the whole sequence (the fused / chunked SSD kernels:
  written here in the SSD's quadratic "attention" form, exp of segment sums) and the step (the
  cache's convolution window rolled by one, the state updated by the recurrence).
* CausalSelfAttention (modules/attention.py): q, k, v = n Wq^T + u_q, ... (u split in three);
  rotary embedding (transformers' LlamaRotaryEmbedding, default rope: inv_freq = theta^(-2i/d),
  rotate-half convention; rope_theta 500000) at the tokens' positions; softmax(q k^T / sqrt(d)),
  causal over the whole sequence, or over the cache and the token; out_proj.
* LlamaMLP (modules/mlp.py): fc2(SiLU(w1 x) * w3 x), hidden = int(2 d_inner / 3).

Sequence modes (implicit_llm/sequential.py):

* "simultaneous": model(input_ids) on the whole sequence, no cache: one solve over [B, L, D].
* "sequential": token 0 with a fresh cache (Mamba2: the whole-sequence path, which writes the
  conv window and the SSM state into the cache at every call, the final call's staying; Llama: a
  DynamicCache filled by the final call), then token t with cache_position t: one solve per token
  over [B, 1, D], the loop reading the committed caches (skip_kv_update), the final call
  committing them.

Everything is float64. One float32 step of the released code is kept out by default: transformers
computes RoPE's inv_freq and cos / sin tables in float32 even in a float64 model; --rope-f32 does
the same (it moves the test's Llama logits by about 8e-9 of their largest magnitude).

Besides the models, this file reads and writes safetensors (F64, F32) and draws seeded random
weights under the published parameter names (with weight norm's _g / _v for the implicit backbone).

  /usr/bin/python3 tests/reference/released_lm.py logits CONFIG.json WEIGHTS.safetensors \
      --tokens 3,1,4,1,5 [--tokens 2,7,1,8,2] [--mode simultaneous|sequential] [--out LOGITS.npy]
  /usr/bin/python3 tests/reference/released_lm.py random-weights CONFIG.json OUT.safetensors --seed 1
"""

import argparse
import json
import struct
import sys

import numpy as np

EPS = 1e-5  # every RMSNorm of the released models (Block norms, norm_f, injection_norm, the gated norm)


# ----------------------------------------------------------------------------------------------
# safetensors

_DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
           "I64": np.dtype("<i8"), "I32": np.dtype("<i4")}


def write_safetensors(path, tensors, dtype="F64"):
    """8-byte little-endian header length, the JSON header, then the tensors' bytes in order."""
    np_dtype = _DTYPES[dtype]
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(np.asarray(tensors[name], dtype=np.float64).astype(np_dtype))
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # the format pads the header with spaces to an 8-byte boundary
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        t = np.frombuffer(data[base + a:base + b], dtype=_DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).astype(np.float64)
    return out


# ----------------------------------------------------------------------------------------------
# config

class Config:
    """The fields of a released config.json the evaluation-mode forward reads."""

    def __init__(self, path_or_dict):
        if isinstance(path_or_dict, dict):
            j = path_or_dict
        else:
            with open(path_or_dict) as f:
                j = json.load(f)
        mt = j["model_type"]
        if mt not in ("implicit_mamba2", "implicit_llama3"):
            raise SystemExit(f"released_lm: model_type {mt!r} is not implicit_mamba2 or implicit_llama3")
        self.llama = mt == "implicit_llama3"
        if j.get("backbone_type", "implicit") != "implicit":
            raise SystemExit("released_lm: only the implicit backbone is modelled")
        bb = j["backbone_config"]
        self.d_model = bb["d_model"]
        self.n_layer = bb["n_layer"]
        bc = bb.get("block_cfg", {})
        if not bb.get("pre_norm", True) or not bb.get("rms_norm", True):
            raise SystemExit("released_lm: only pre-norm RMSNorm blocks are modelled")
        if j.get("d_embed") not in (None, self.d_model) or not j.get("tie_embeddings", True):
            raise SystemExit("released_lm: only tied heads with d_embed == d_model are modelled")
        if self.llama:
            self.n_head = bc["n_head"]
            self.d_head = self.d_model // self.n_head
            self.rope_theta = float(bc.get("rope_theta", 500000.0))
            self.hidden = int(2 * bb["d_inner"] / 3)  # LlamaMLP, multiple_of 1, no ffn_dim_multiplier
            self.d_in_proj = 3 * self.d_model
            vocab = j.get("vocab_size", j.get("n_tokens"))
        else:
            if bb.get("d_inner", 0) != 0:
                raise SystemExit("released_lm: Mamba2 with an MLP (d_inner > 0) is not modelled")
            self.d_state = bc.get("d_state", 128)
            self.expand = bc.get("expand", 2)
            self.headdim = bc.get("headdim", 64)
            self.d_conv = bc.get("d_conv", 4)
            if bc.get("ngroups", 1) != 1:
                raise SystemExit("released_lm: ngroups 1 only")
            self.d_inner = self.expand * self.d_model
            self.nheads = self.d_inner // self.headdim
            self.conv_dim = self.d_inner + 2 * self.d_state
            self.d_in_proj = 2 * self.d_inner + 2 * self.d_state + self.nheads
            vocab = j["n_tokens"]
        if j.get("pad_vocab", False):
            m = j.get("pad_vocab_size_multiple", 8)
            if vocab % m:
                vocab += m - vocab % m
        self.vocab = vocab
        deq = j["deq_params"]
        s = deq["solver"]
        self.f_tol = float(s["f_tol"])
        self.f_thres = s["eval_f_max_iter"] if s["eval_f_max_iter"] > 0 else int(s["f_max_iter"] * s["eval_factor"])
        self.tau = float(deq["training"]["tau"])
        n = deq.get("norm", {})
        self.norm_type = n.get("norm_type", "weight_norm")
        self.norm_no_scale = bool(n.get("norm_no_scale", False))
        self.norm_target = float(n.get("norm_target_norm", 1.0))
        if n.get("norm_clip", False) or self.norm_type not in ("weight_norm", "none"):
            raise SystemExit("released_lm: only weight_norm without clipping (or none) is modelled")
        if bb.get("do_weight_norm", True) is False:
            self.norm_type = "none"


# ----------------------------------------------------------------------------------------------
# weights

def linear_names(cfg):
    """The backbone's nn.Linear / nn.Conv1d weights, which torchdeq's apply_norm reparametrises."""
    names = ["backbone.injection.weight"]
    for i in range(cfg.n_layer):
        p = f"backbone.layers.{i}."
        if cfg.llama:
            names += [p + "mixer.wq.weight", p + "mixer.wk.weight", p + "mixer.wv.weight",
                      p + "mixer.out_proj.weight", p + "mlp.w1.weight", p + "mlp.w3.weight", p + "mlp.fc2.weight"]
        else:
            names += [p + "mixer.in_proj.weight", p + "mixer.conv1d.weight", p + "mixer.out_proj.weight"]
    return names


def effective_weights(cfg, sd):
    """The state dict with weight norm folded (torchdeq WeightNorm.compute_weight, dim 0) and the
    tied embedding under its one name."""
    w = dict(sd)
    if cfg.norm_type == "weight_norm":
        for name in linear_names(cfg):
            if name + "_v" not in w:
                continue  # saved after remove_norm: a plain weight
            v = w.pop(name + "_v")
            norm = np.sqrt((v.reshape(v.shape[0], -1) ** 2).sum(axis=1)).reshape((v.shape[0],) + (1,) * (v.ndim - 1))
            g = cfg.norm_target if cfg.norm_no_scale else w.pop(name + "_g")
            w[name] = v * (g / norm)
    emb = w.get("word_emb.emb.weight", w.get("criterion.decoder.weight"))
    w["word_emb.emb.weight"] = emb
    return w


def random_weights(cfg, seed, tied_name="word_emb.emb.weight", emb_std=0.3, dt_range=(0.05, 0.5),
                   read_gain=1.0, out_gain=1.0):
    """Seeded weights under the published names, as the released checkpoints store them: the
    implicit backbone's linears and conv as weight_g [out, 1(, 1)] and weight_v (weight norm).
    Linears U(+-1/sqrt(fan_in)) as torch initialises them, then scaled: `read_gain` for those that
    read the iterate (in_proj; wq, wk, wv; w1, w3), `out_gain` for those that write it (out_proj,
    fc2): a weaker read and a stronger write make f(z) = norm_f(z + block(z; u)) a contraction."""
    rng = np.random.default_rng(seed)
    D = cfg.d_model
    sd = {}

    def lin(name, out, fan_in, shape=None, gain=1.0):
        shape = shape or (out, fan_in)
        v = rng.uniform(-1, 1, size=shape) / np.sqrt(fan_in)
        if cfg.norm_type == "weight_norm":
            rows = np.sqrt((v.reshape(out, -1) ** 2).sum(axis=1))
            g = rows * rng.uniform(0.7, 1.3, size=out) * gain  # not ||V||: the fold must matter
            sd[name + "_v"] = v
            if not cfg.norm_no_scale:
                sd[name + "_g"] = g.reshape((out,) + (1,) * (len(shape) - 1))
        else:
            sd[name] = v * gain

    def gain(name, n):
        sd[name] = rng.uniform(0.8, 1.2, size=n)

    sd[tied_name] = rng.normal(0, emb_std, size=(cfg.vocab, D))
    gain("backbone.injection_norm.weight", D)
    lin("backbone.injection.weight", cfg.d_in_proj, D)
    sd["backbone.injection.bias"] = rng.uniform(-0.1, 0.1, size=cfg.d_in_proj)
    for i in range(cfg.n_layer):
        p = f"backbone.layers.{i}."
        gain(p + "norm.weight", D)
        if cfg.llama:
            for m in ("wq", "wk", "wv"):
                lin(p + f"mixer.{m}.weight", D, D, gain=read_gain)
            lin(p + "mixer.out_proj.weight", D, D, gain=out_gain)
            gain(p + "norm2.weight", D)
            lin(p + "mlp.w1.weight", cfg.hidden, D, gain=read_gain)
            lin(p + "mlp.w3.weight", cfg.hidden, D, gain=read_gain)
            lin(p + "mlp.fc2.weight", D, cfg.hidden, gain=out_gain)
        else:
            H, K = cfg.nheads, cfg.d_conv
            lin(p + "mixer.in_proj.weight", cfg.d_in_proj, D, gain=read_gain)
            lin(p + "mixer.conv1d.weight", cfg.conv_dim, K, shape=(cfg.conv_dim, 1, K))
            sd[p + "mixer.conv1d.bias"] = rng.uniform(-1, 1, size=cfg.conv_dim) / np.sqrt(K)
            dt = np.exp(rng.uniform(np.log(dt_range[0]), np.log(dt_range[1]), size=H))
            sd[p + "mixer.dt_bias"] = dt + np.log(-np.expm1(-dt))  # inverse softplus
            sd[p + "mixer.A_log"] = np.log(rng.uniform(1, 16, size=H))
            sd[p + "mixer.D"] = rng.uniform(0.5, 1.5, size=H)
            gain(p + "mixer.norm.weight", cfg.d_inner)
            lin(p + "mixer.out_proj.weight", D, cfg.d_inner, gain=out_gain)
    gain("backbone.norm_f.weight", D)
    return sd


# ----------------------------------------------------------------------------------------------
# the model

def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    # log(1 + exp(x)) without overflow (torch's softplus returns x itself above 20: 2e-9 apart)
    return np.logaddexp(0.0, x)


class Mamba2Mixer:
    def __init__(self, cfg, w, i):
        p = f"backbone.layers.{i}.mixer."
        self.c = cfg
        self.W_in = w[p + "in_proj.weight"]
        self.conv_w = w[p + "conv1d.weight"].reshape(cfg.conv_dim, cfg.d_conv)
        self.conv_b = w[p + "conv1d.bias"]
        self.dt_bias = w[p + "dt_bias"]
        self.A = -np.exp(w[p + "A_log"])
        self.D = w[p + "D"]
        self.norm_w = w[p + "norm.weight"]
        self.W_out = w[p + "out_proj.weight"]

    def _split(self, zxbcdt):
        c = self.c
        z = zxbcdt[..., :c.d_inner]
        xBC = zxbcdt[..., c.d_inner:2 * c.d_inner + 2 * c.d_state]
        dt = zxbcdt[..., 2 * c.d_inner + 2 * c.d_state:]
        return z, xBC, dt

    def _out(self, y, z):
        # RMSNormGated, norm_before_gate=False, group_size = d_ssm (one group): norm(y * silu(z)) * w
        return rms_norm(y * silu(z), self.norm_w) @ self.W_out.T

    def full(self, n, u):
        """The whole-sequence path (fused conv + chunked SSD scan): n [B, L, D], u [B, L, d_in_proj].
        Returns the output and the cache it leaves: the raw xBC window, the last SSM state."""
        c = self.c
        Bsz, L, _ = n.shape
        z, xBC, dt = self._split(n @ self.W_in.T + u)
        K = c.d_conv
        # causal depthwise conv (nn.Conv1d with K - 1 zeros of padding on the left, first L outputs)
        pad = np.concatenate([np.zeros((Bsz, K - 1, c.conv_dim)), xBC], axis=1)
        conv = np.zeros_like(xBC)
        for k in range(K):
            conv += pad[:, k:k + L, :] * self.conv_w[:, k]
        xs = silu(conv + self.conv_b)
        x = xs[..., :c.d_inner].reshape(Bsz, L, c.nheads, c.headdim)
        Bm = xs[..., c.d_inner:c.d_inner + c.d_state]
        Cm = xs[..., c.d_inner + c.d_state:]
        delta = softplus(dt + self.dt_bias)                          # [B, L, H]
        # SSD, one chunk: y_t = sum_{s<=t} (C_t . B_s) exp(sum_{r=s+1..t} delta_r A) delta_s x_s + D x_t
        cum = np.cumsum(delta * self.A, axis=1)                       # [B, L, H]
        seg = cum[:, :, None, :] - cum[:, None, :, :]                 # [B, t, s, H]
        causal = np.tril(np.ones((L, L), dtype=bool))[None, :, :, None]
        decay = np.where(causal, np.exp(np.where(causal, seg, 0.0)), 0.0)
        cb = np.einsum("btn,bsn->bts", Cm, Bm)
        y = np.einsum("bts,btsh,bsh,bshp->bthp", cb, decay, delta, x) + self.D[None, None, :, None] * x
        # the state the scan returns (return_final_states): h_L = sum_s exp(cum_L - cum_s) delta_s x_s B_s^T
        last = np.exp(cum[:, -1:, :] - cum)                            # [B, L, H]
        h = np.einsum("bsh,bsh,bshp,bsn->bhpn", last, delta, x, Bm)
        # the cache's conv window: F.pad(xBC^T, (d_conv - L, 0)): the last d_conv raw inputs
        xt = np.transpose(xBC, (0, 2, 1))
        if L >= K:
            window = xt[:, :, L - K:]
        else:
            window = np.concatenate([np.zeros((Bsz, c.conv_dim, K - L)), xt], axis=2)
        out = self._out(y.reshape(Bsz, L, c.d_inner), z)
        return out, (window, h)

    def step(self, n, u, state):
        """Mamba2.step: one token, n [B, D], u [B, d_in_proj], state (conv window [B, C, K],
        ssm state [B, H, P, N]); returns the output and the new state."""
        c = self.c
        conv_state, ssm_state = state
        z, xBC, dt = self._split(n @ self.W_in.T + u)
        new_conv = np.roll(conv_state, -1, axis=-1)
        new_conv[:, :, -1] = xBC
        xs = silu(np.sum(new_conv * self.conv_w, axis=-1) + self.conv_b)
        x = xs[:, :c.d_inner].reshape(-1, c.nheads, c.headdim)
        Bm = xs[:, c.d_inner:c.d_inner + c.d_state]
        Cm = xs[:, c.d_inner + c.d_state:]
        delta = softplus(dt + self.dt_bias)                          # [B, H]
        dA = np.exp(delta * self.A)
        dBx = np.einsum("bh,bn,bhp->bhpn", delta, Bm, x)
        new_ssm = ssm_state * dA[:, :, None, None] + dBx
        y = np.einsum("bhpn,bn->bhp", new_ssm, Cm) + self.D[:, None] * x
        out = self._out(y.reshape(-1, c.d_inner), z)
        return out, (new_conv, new_ssm)


class Attention:
    def __init__(self, cfg, w, i, rope_f32=False):
        p = f"backbone.layers.{i}.mixer."
        self.c = cfg
        self.Wq, self.Wk, self.Wv = w[p + "wq.weight"], w[p + "wk.weight"], w[p + "wv.weight"]
        self.Wo = w[p + "out_proj.weight"]
        d = cfg.d_head
        if rope_f32:  # transformers computes inv_freq and the cos / sin tables in float32
            self.inv_freq = (1.0 / (np.float32(cfg.rope_theta) ** (np.arange(0, d, 2).astype(np.float32) / np.float32(d)))).astype(np.float32)
        else:
            self.inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
        self.rope_f32 = rope_f32

    def _rope(self, x, pos):
        # x [B, H, T, d] at positions pos [T]; rotate-half: x' = x cos + rotate_half(x) sin
        if self.rope_f32:
            freqs = pos.astype(np.float32)[:, None] * self.inv_freq[None, :]
            emb = np.concatenate([freqs, freqs], axis=-1)
            cos, sin = np.cos(emb).astype(np.float64), np.sin(emb).astype(np.float64)
        else:
            freqs = pos.astype(np.float64)[:, None] * self.inv_freq[None, :]
            emb = np.concatenate([freqs, freqs], axis=-1)
            cos, sin = np.cos(emb), np.sin(emb)
        h = x.shape[-1] // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
        return x * cos + rot * sin

    def __call__(self, n, u, p0, cache):
        """n [B, T, D] at positions p0 .. p0+T-1, u [B, T, 3D]; cache: (k, v) [B, H, p0, d] of the
        earlier tokens (rotated keys), or None. Returns the output and this call's (k, v)."""
        c = self.c
        Bsz, T, D = n.shape
        uq, uk, uv = u[..., :D], u[..., D:2 * D], u[..., 2 * D:]
        q, k, v = n @ self.Wq.T + uq, n @ self.Wk.T + uk, n @ self.Wv.T + uv
        heads = lambda t: np.transpose(t.reshape(Bsz, T, c.n_head, c.d_head), (0, 2, 1, 3))
        q, k, v = heads(q), heads(k), heads(v)
        pos = np.arange(p0, p0 + T)
        q, k = self._rope(q, pos), self._rope(k, pos)
        new = (k, v)
        if cache is not None:
            k = np.concatenate([cache[0], k], axis=2)
            v = np.concatenate([cache[1], v], axis=2)
        S = k.shape[2]
        s = np.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(c.d_head)
        # causal: query at position p0 + t sees keys 0 .. p0 + t (SDPA's is_causal over the whole
        # sequence; a single query with a cache sees all the keys)
        allowed = np.arange(S)[None, :] <= (p0 + np.arange(T))[:, None]
        s = np.where(allowed, s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(axis=-1, keepdims=True)
        y = np.einsum("bhts,bhsd->bhtd", a, v)
        y = np.transpose(y, (0, 2, 1, 3)).reshape(Bsz, T, D)
        return y @ self.Wo.T, new


class ReleasedLM:
    """The released ImplicitMambaForCausalLM / ImplicitLlamaForCausalLM in evaluation mode.

    `damping`, `final_call` and `extra_steps` exist only so that the test can show that it fails
    when the solve differs (run_released.py --self-test); the released code is damping = tau,
    final_call = True, extra_steps = 0 (at most f_thres - 1 steps)."""

    def __init__(self, cfg, state_dict, rope_f32=False, damping=None, final_call=True, extra_steps=0):
        self.c = cfg
        w = effective_weights(cfg, state_dict)
        self.E = w["word_emb.emb.weight"]
        if self.E.shape != (cfg.vocab, cfg.d_model):
            raise SystemExit(f"released_lm: embedding {self.E.shape}, the config gives {(cfg.vocab, cfg.d_model)}")
        self.inj_norm = w["backbone.injection_norm.weight"]
        self.W_inj, self.b_inj = w["backbone.injection.weight"], w["backbone.injection.bias"]
        self.norm_f = w["backbone.norm_f.weight"]
        self.layers = []
        for i in range(cfg.n_layer):
            p = f"backbone.layers.{i}."
            L = {"norm": w[p + "norm.weight"]}
            if cfg.llama:
                L["mixer"] = Attention(cfg, w, i, rope_f32)
                L["norm2"] = w[p + "norm2.weight"]
                L["w1"], L["w3"], L["fc2"] = w[p + "mlp.w1.weight"], w[p + "mlp.w3.weight"], w[p + "mlp.fc2.weight"]
            else:
                L["mixer"] = Mamba2Mixer(cfg, w, i)
            self.layers.append(L)
        self.damping = cfg.tau if damping is None else damping
        self.final_call = final_call
        self.extra_steps = extra_steps
        self.steps = []  # the loop's step count per solve
        self.diffs = []  # the residuals the loop tested, per solve

    # f(z; u): the DEQ function. `ctx` says which path each mixer takes and holds the caches:
    #   {"kind": "full"} (whole sequence, no cache), {"kind": "first"} (token 0 with a fresh cache),
    #   {"kind": "step", "pos": t} (token t > 0 reading the committed cache). With commit, the
    #   call's states replace the cache.
    def func(self, z, u, ctx, commit):
        for i, L in enumerate(self.layers):
            n = rms_norm(z, L["norm"])
            if self.c.llama:
                kind = ctx["kind"]
                if kind == "full":
                    a, _ = L["mixer"](n, u, 0, None)
                else:
                    pos = 0 if kind == "first" else ctx["pos"]
                    cache = None if kind == "first" else ctx["cache"][i]
                    a, new = L["mixer"](n, u, pos, cache)
                    if commit:  # DynamicCache.update: the token's rotated k and v appended
                        ctx["cache"][i] = new if cache is None else (np.concatenate([cache[0], new[0]], axis=2),
                                                                     np.concatenate([cache[1], new[1]], axis=2))
                z1 = z + a
                n2 = rms_norm(z1, L["norm2"])
                z = z1 + (silu(n2 @ L["w1"].T) * (n2 @ L["w3"].T)) @ L["fc2"].T
            else:
                kind = ctx["kind"]
                if kind in ("full", "first"):
                    m, state = L["mixer"].full(n, u)
                    if kind == "first":
                        # the whole-sequence path writes the cache on every call (skip_kv_update
                        # only guards the step path); the final call's states are what stay
                        ctx["cache"][i] = state
                else:
                    m2, state = L["mixer"].step(n[:, 0, :], u[:, 0, :], ctx["cache"][i])
                    m = m2[:, None, :]
                    if commit:
                        ctx["cache"][i] = state
                z = z + m
        return rms_norm(z, self.norm_f)

    def solve(self, u, ctx):
        """ImplicitMixin._sequential_step (is_first_token False, ema_alpha None)."""
        z = np.zeros(u.shape[:-1] + (self.c.d_model,))
        count = -1
        diffs = []
        for count in range(self.c.f_thres - 1 + self.extra_steps):
            z_next = self.func(z, u, ctx, commit=False)
            diff = np.linalg.norm(z_next - z) / (1e-6 + np.linalg.norm(z))
            diffs.append(diff)
            z = (1 - self.damping) * z + self.damping * z_next
            if diff < self.c.f_tol:
                break
        self.steps.append(count + 1)
        self.diffs.append(diffs)
        if not self.final_call:  # (a wrong solve, for the self-test only)
            return z
        return self.func(z, u, ctx, commit=True)

    def forward(self, ids, ctx):
        e = self.E[ids]                                               # [B, T, D]
        u = rms_norm(e, self.inj_norm) @ self.W_inj.T + self.b_inj    # the injection, once
        z = self.solve(u, ctx)
        return z @ self.E.T                                           # the tied head

    def logits(self, tokens, mode="simultaneous"):
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 2:
            raise ValueError("tokens must be [B, L]")
        self.steps, self.diffs = [], []
        if mode == "simultaneous":
            return self.forward(tokens, {"kind": "full"})
        if mode != "sequential":
            raise ValueError(f"mode {mode!r}")
        ctx = {"kind": "first", "cache": [None] * len(self.layers)}
        out = [self.forward(tokens[:, :1], ctx)]
        for t in range(1, tokens.shape[1]):
            ctx["kind"], ctx["pos"] = "step", t
            out.append(self.forward(tokens[:, t:t + 1], ctx))
        return np.concatenate(out, axis=1)


# ----------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("logits", help="the released model's logits for token sequences")
    a.add_argument("config")
    a.add_argument("weights")
    a.add_argument("--tokens", action="append", required=True, help="one sequence, comma-separated (repeat for a batch)")
    a.add_argument("--mode", choices=["simultaneous", "sequential"], default="simultaneous")
    a.add_argument("--rope-f32", action="store_true", help="RoPE tables in float32, as transformers computes them")
    a.add_argument("--out", help="write the logits [B, L, V] as .npy")
    r = sub.add_parser("random-weights", help="seeded weights under the published names, as safetensors")
    r.add_argument("config")
    r.add_argument("out")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--dtype", choices=["F64", "F32"], default="F64")
    r.add_argument("--tied-name", default="word_emb.emb.weight", choices=["word_emb.emb.weight", "criterion.decoder.weight"])
    r.add_argument("--read-gain", type=float, default=1.0, help="scale of the linears that read the iterate")
    r.add_argument("--out-gain", type=float, default=1.0, help="scale of the linears that write it")
    args = ap.parse_args(argv)
    cfg = Config(args.config)
    if args.cmd == "random-weights":
        sd = random_weights(cfg, args.seed, args.tied_name, read_gain=args.read_gain, out_gain=args.out_gain)
        write_safetensors(args.out, sd, args.dtype)
        return 0
    seqs = [[int(t) for t in s.split(",")] for s in args.tokens]
    model = ReleasedLM(cfg, read_safetensors(args.weights), rope_f32=args.rope_f32)
    logits = model.logits(np.array(seqs), args.mode)
    if args.out:
        np.save(args.out, logits)
    np.set_printoptions(precision=6, suppress=True, linewidth=120)
    print(f"steps per solve: {model.steps}")
    print(f"argmax: {logits.argmax(axis=-1).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
