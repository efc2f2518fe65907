#!/usr/bin/python3
"""aoc against the released implicit language models (issue 14; ctest released_models_match_reference).

For small seeded models of the released implicit Mamba2 and Llama (microsoft/implicit_languagemodels),
in both of the released model's sequence modes and at batch 1 and 2, aoc's own commands

    aoc import CONFIG --weights model.safetensors -o graph.json --weights-out graph.h5
    aoc compile graph.json --weights graph.h5 --hw aoc-48 -o prog.aocp.h5
    aoc run prog.aocp.h5 --inputs tokens.h5 --sequence MODE --backend cpu -o out.h5
    aoc run prog.aocp.h5 --inputs tokens.h5 --sequence MODE --backend sim --ideal-optics [--precision f64] -o out.h5

must give the logits of the independent float64 reference (tests/reference/released_lm.py, written
from the released code's equations) within 1e-6 of their largest magnitude, the same argmax at every
position and the same fixed-point step counts. The sim backend runs without converters or noise
(no --quantize, no --noise) with ideal optics, its products in float64 ("sim") and in float32, the
machine's loop precision ("sim-f32"). Each model is written as a released checkpoint would be: a
config.json in the released format and a safetensors file under the published parameter names, with
torchdeq's weight norm (weight_g, weight_v) on the implicit backbone's linears and conv.

The models: Mamba2 (d_model 16, 2 layers, headdim 8, d_state 8, n_tokens 45 padded to 48) and Llama
(d_model 32, 2 layers, 4 heads, d_inner 48, vocab 50), each with the released solver (f_tol 0.05,
f_thres = f_max_iter 24 x eval_factor 4 = 96) and with a tight one (f_tol 1e-6, eval_f_max_iter 40:
some solves stop at the cap of 39 steps).

    /usr/bin/python3 tests/reference/run_released.py build/aoc [--keep DIR] [--self-test]

Prints one line per case with the measured relative error; on a failure one line per failing case,
"FAIL: ...", and exit status 1. --self-test checks that the comparison can fail: it perturbs the
reference's solve (damping 0.7 for tau 0.8; no final call; f_thres steps instead of f_thres - 1) and
exits 1 unless each perturbation makes the cases it must fail. Exit 77 (ctest: skipped) when numpy or
h5py is missing (scripts/install-deps installs python3-numpy and python3-h5py).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
except ImportError as e:  # the Debian interpreter with python3-numpy, python3-h5py
    print(f"SKIPPED: {e} (apt-get install python3-numpy python3-h5py; scripts/install-deps does)")
    sys.exit(77)

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import released_lm as R  # noqa: E402

REL_TOL = 1e-6


def deq_params(f_tol, f_max_iter=24, eval_factor=4.0, eval_f_max_iter=0, tau=0.8):
    """deq_params as the released configs give them (hf_models/*/config.json)."""
    return {
        "norm": {"norm_clip": False, "norm_clip_val": 1.0, "norm_no_scale": False, "norm_target_norm": 1.0,
                 "norm_type": "weight_norm", "sn_n_power_iters": 1},
        "regularization": {"jac_incremental": 0, "jac_loss_freq": 0.0, "jac_loss_weight": 0.0, "sradius_mode": True},
        "solver": {"b_max_iter": 32, "b_solver": "fixed_point_iter", "b_stop_mode": "rel", "b_tol": 0.001,
                   "eval_f_max_iter": eval_f_max_iter, "eval_factor": eval_factor, "f_max_iter": f_max_iter,
                   "f_solver": "fixed_point_iter", "f_stop_mode": "rel", "f_tol": f_tol},
        "training": {"core": "sliced", "gamma": 0.8, "grad": 4, "hook_ift": False, "ift": False, "indexing": [],
                     "n_states": 1, "sup_gap": -1, "sup_loc": [], "tau": tau},
    }


def common(d_model, n_layer):
    return {"d_model": d_model, "dropout": 0.0, "init_gain": 0.5, "n_layer": n_layer, "pre_norm": True,
            "pretrain_iter": 4, "pretrain_steps": 0, "rms_norm": True}


def mamba2_config(deq):
    # hf_models/mamba2-130m-implicit/config.json, shrunk
    return {
        "architectures": ["ImplicitMambaForCausalLM"], "average_eval": True,
        "backbone_config": {"block_cfg": {"d_state": 8, "expand": 2, "headdim": 8}, "block_type": "mamba2",
                            "d_inner": 0, **common(16, 2)},
        "backbone_type": "implicit", "d_embed": 16, "data_info": {}, "dataset_name": None, "deq_params": deq,
        "dropout": 0.0, "emb_init_std": 0.01, "head_bias": False, "keep_sequence_dim": False,
        "load_from_pretrained_shell": False, "masked_training": False, "model_type": "implicit_mamba2",
        "n_tokens": 45, "pad_vocab": True, "pad_vocab_size_multiple": 16, "save_output_ids": False,
        "tie_embeddings": True, "tokenizer": "EleutherAI/gpt-neox-20b", "torch_dtype": "float32",
        "transformers_version": "4.51.3", "vocab_size": 45, "weight_decay": 0.0,
    }


def llama_config(deq):
    # hf_models/llama3-130m-implicit/config.json, shrunk
    return {
        "architectures": ["ImplicitLlamaForCausalLM"], "average_eval": True,
        "backbone_config": {"block_cfg": {"n_head": 4}, "block_type": "transformer", "d_inner": 48,
                            "mlp_type": "llama_mlp", **common(32, 2)},
        "backbone_type": "implicit", "d_embed": 32, "data_info": {}, "dataset_name": None, "deq_params": deq,
        "dropout": 0.0, "emb_init_std": 0.01, "head_bias": False, "keep_sequence_dim": False,
        "model_type": "implicit_llama3", "pad_vocab": False, "pad_vocab_size_multiple": 8, "save_output_ids": False,
        "tie_embeddings": True, "tokenizer": "EleutherAI/gpt-neox-20b", "torch_dtype": "float32",
        "transformers_version": "4.51.3", "vocab_size": 50, "weight_decay": 0.1,
    }


RELEASED = deq_params(0.05)                                  # f_thres = int(24 * 4.0) = 96
TIGHT = deq_params(1e-6, eval_f_max_iter=40)                 # f_thres = 40: at most 39 steps

# name, config, weights seed, safetensors dtype, the tied tensor's saved name, sequence length.
# A released checkpoint stores the tied embedding once, under either name (docs/ir.md).
MODELS = [
    ("mamba2", mamba2_config(RELEASED), 11, "F64", "word_emb.emb.weight", 6),
    ("mamba2-tight", mamba2_config(TIGHT), 12, "F32", "criterion.decoder.weight", 6),
    ("llama3", llama_config(RELEASED), 21, "F32", "criterion.decoder.weight", 7),
    ("llama3-tight", llama_config(TIGHT), 22, "F64", "word_emb.emb.weight", 7),
]
BACKENDS = [
    ("cpu", ["--backend", "cpu"]),
    ("sim", ["--backend", "sim", "--ideal-optics", "--precision", "f64"]),
    ("sim-f32", ["--backend", "sim", "--ideal-optics", "--precision", "f32"]),
]
MODES = ["simultaneous", "sequential"]
BATCHES = [1, 2]


# The float32 products move the tested residual by about 1e-7; with f_tol 1e-6 a residual lands
# within that of the tolerance (the reference's smallest |diff - f_tol| is 2e-8 here), so whether
# that step stops is float32's chance, not aoc's: sim-f32 runs the released f_tol only (there the
# smallest margin is 5e-4).
def backends_for(cfg):
    return [b for b in BACKENDS if b[0] != "sim-f32" or cfg.f_tol >= 1e-3]


class AocError(Exception):
    pass


def aoc(binary, *args):
    try:
        p = subprocess.run([binary, *args], capture_output=True, text=True)
    except OSError as e:
        raise AocError(f"cannot run {binary}: {e.strerror}")
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        raise AocError(f"aoc {' '.join(args[:1])} exited {p.returncode}: {msg[-1] if msg else '(no output)'}")
    return p.stdout


def read_run(path):
    """aoc run's output: the logits (the graph's output, by its name) and the FixedPoint's iterations."""
    with h5py.File(path, "r") as f:
        names = [k for k in f.keys() if k == "logits"]
        its = [k for k in f.keys() if k.endswith(".iterations")]
        if len(names) != 1 or len(its) != 1:
            raise AocError(f"{path}: expected one logits dataset and one .iterations, found {sorted(f.keys())}")
        # iterations: [B], or [B, L] in sequential mode; the comparison reads them sample-major
        return f[names[0]][...].astype(np.float64), f[its[0]][...].astype(np.int64).reshape(-1)


def compare(ref, ref_steps, got, got_iters, mode):
    """One case: the failures of its logits (error, argmax), of its step counts, and its relative error."""
    if got.shape != ref.shape:
        return [f"logits shape {list(got.shape)}, the reference's {list(ref.shape)}"], [], float("inf")
    if not np.all(np.isfinite(got)):
        return ["non-finite logits"], [], float("inf")
    logits, steps = [], []
    rel = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    if not rel <= REL_TOL:
        logits.append(f"max|aoc - ref| / max|ref| = {rel:.3e} > {REL_TOL:g}")
    am_ref, am_got = ref.argmax(axis=-1), got.argmax(axis=-1)
    bad = np.argwhere(am_ref != am_got)
    if len(bad):
        b, t = bad[0]
        logits.append(f"argmax differs at {len(bad)} of {am_ref.size} positions (first [b {b}, t {t}]: "
                      f"aoc {am_got[b, t]}, ref {am_ref[b, t]})")
    # the released rule: every sample reports the solve's step count (sequential: one solve per
    # token; aoc writes them sample-major)
    B = ref.shape[0]
    want = np.full(B, ref_steps[0]) if mode == "simultaneous" else np.tile(np.array(ref_steps), B)
    if got_iters.shape != want.shape or not np.array_equal(got_iters, want):
        steps.append(f"fixed-point steps {got_iters.tolist()}, the reference's {want.tolist()}")
    return logits, steps, rel


def tokens_for(cfg_json, seed, B, L):
    rng = np.random.default_rng(seed)
    n = cfg_json.get("n_tokens", cfg_json.get("vocab_size")) if cfg_json["model_type"] == "implicit_mamba2" \
        else cfg_json["vocab_size"]
    return rng.integers(0, n, size=(B, L)).astype(np.int64)  # real token ids (below the padded rows)


def build(binary, work, name, cfg_json, seed, dtype, tied, L):
    """Writes the released-format model and its tokens; imports and compiles it with aoc."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2)
    cfg = R.Config(cfg_json)
    sd = R.random_weights(cfg, seed, tied_name=tied, read_gain=0.3, out_gain=2.0)
    R.write_safetensors(os.path.join(d, "model.safetensors"), sd, dtype)
    toks = tokens_for(cfg_json, seed + 1000, max(BATCHES), L)
    for B in BATCHES:
        with h5py.File(os.path.join(d, f"tokens_b{B}.h5"), "w") as f:
            f["tokens"] = toks[:B]
    aoc(binary, "import", os.path.join(d, "config.json"), "--weights", os.path.join(d, "model.safetensors"),
        "-o", os.path.join(d, "graph.json"), "--weights-out", os.path.join(d, "graph.h5"))
    aoc(binary, "compile", os.path.join(d, "graph.json"), "--weights", os.path.join(d, "graph.h5"), "--hw", "aoc-48",
        "-o", os.path.join(d, "prog.aocp.h5"))
    return d, cfg, toks


def reference(cfg, d, toks, B, mode, per_sample=False, with_margin=False, **perturb):
    """The released model's logits and step counts (per solve). The reference reads the checkpoint
    as written (an F32 file: the float32-rounded values). per_sample (a wrong solve, for the
    self-test): each sequence solved alone, i.e. one residual per sample instead of one over the batch.
    with_margin: also the smallest |diff - f_tol| / f_tol over every residual the loops tested: how
    far the stop decisions are from the tolerance (a backend must compute the residual this well)."""
    m = R.ReleasedLM(cfg, R.read_safetensors(os.path.join(d, "model.safetensors")), **perturb)
    if per_sample:
        rows = [m.logits(toks[b:b + 1], mode) for b in range(B)]
        return np.concatenate(rows, axis=0), list(m.steps)
    lg = m.logits(toks[:B], mode)
    if with_margin:
        return lg, list(m.steps), min(abs(d / cfg.f_tol - 1) for ds in m.diffs for d in ds)
    return lg, list(m.steps)


PERTURBATIONS = [
    # (label, ReleasedLM arguments, which cases must fail: "released" = every case with the released
    # f_tol 0.05, "any" = at least one case)
    ("damping 0.7 instead of tau 0.8", {"damping": 0.7}, "released"),
    ("no final call (the damped iterate returned)", {"final_call": False}, "released"),
    ("f_thres steps instead of f_thres - 1", {"extra_steps": 1}, "any"),
    ("one residual per sample instead of one over the batch", {"per_sample": True}, "any"),
]


def main():
    ap = argparse.ArgumentParser(description="aoc against the released implicit language models (float64 reference)")
    ap.add_argument("aoc", help="the aoc binary")
    ap.add_argument("--keep", help="write the cases' files here and keep them (default: a temporary directory)")
    ap.add_argument("--self-test", action="store_true",
                    help="also check that perturbing the reference's solve makes the comparison fail")
    args = ap.parse_args()
    binary = os.path.abspath(args.aoc)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"FAIL: {binary}: no such executable (the aoc binary: build/aoc)")
        return 1
    t0 = time.time()
    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="aoc-released-")
    os.makedirs(work, exist_ok=True)
    failures, n_cases = [], 0
    results = {}  # (model, B, mode, backend) -> (aoc logits, aoc iterations); for --self-test
    print(f"released_models: aoc {binary} against tests/reference/released_lm.py (float64), "
          f"pass: max|aoc - ref| / max|ref| <= {REL_TOL:g}, the same argmax and steps")
    print(f"{'model':<13} {'B':>1} {'mode':<12} {'backend':<8} {'rel error':>10}  {'argmax':>7}  {'margin':>8}  "
          f"steps (reference; margin: the smallest |diff - f_tol| / f_tol the loops met)")
    try:
        for name, cfg_json, seed, dtype, tied, L in MODELS:
            try:
                d, cfg, toks = build(binary, work, name, cfg_json, seed, dtype, tied, L)
            except AocError as e:
                for B in BATCHES:
                    for mode in MODES:
                        for be, _ in backends_for(R.Config(cfg_json)):
                            n_cases += 1
                            failures.append(f"{name} B={B} {mode} {be}: {e}")
                continue
            for B in BATCHES:
                for mode in MODES:
                    ref, steps, margin = reference(cfg, d, toks, B, mode, with_margin=True)
                    for be, opts in backends_for(cfg):
                        n_cases += 1
                        case = f"{name} B={B} {mode} {be}"
                        out = os.path.join(d, f"out_b{B}_{mode}_{be}.h5")
                        try:
                            aoc(binary, "run", os.path.join(d, "prog.aocp.h5"), "--inputs",
                                os.path.join(d, f"tokens_b{B}.h5"), "--sequence", mode, *opts, "--quiet", "-o", out)
                            got, iters = read_run(out)
                        except AocError as e:
                            failures.append(f"{case}: {e}")
                            print(f"{name:<13} {B:>1} {mode:<12} {be:<8} {'-':>10}  {'-':>7}  aoc failed")
                            continue
                        results[(name, B, mode, be)] = (got, iters)
                        bad_logits, bad_steps, rel = compare(ref, steps, got, iters, mode)
                        problems = bad_logits + bad_steps
                        agree = int(np.sum(ref.argmax(-1) == got.argmax(-1))) if got.shape == ref.shape else 0
                        st = ",".join(map(str, steps))
                        print(f"{name:<13} {B:>1} {mode:<12} {be:<8} {rel:>10.2e}  {agree:>3}/{ref.shape[0] * ref.shape[1]:<3}  "
                              f"{margin:>8.3g}  {st}{'' if not problems else '  FAIL'}")
                        if problems:
                            failures.append(f"{case}: " + "; ".join(problems))

        if args.self_test:
            print("self-test: the comparison must fail when the reference's solve is perturbed")
            for label, kw, need in PERTURBATIONS:
                caught, released_missed = 0, []
                total = 0
                for name, cfg_json, seed, dtype, tied, L in MODELS:
                    d = os.path.join(work, name)
                    cfg = R.Config(cfg_json)
                    toks = tokens_for(cfg_json, seed + 1000, max(BATCHES), L)
                    for B in BATCHES:
                        for mode in MODES:
                            ref, steps = reference(cfg, d, toks, B, mode, **kw)
                            for be, _ in backends_for(cfg):
                                if (name, B, mode, be) not in results:
                                    continue
                                total += 1
                                # detected by the logits alone (the step counts would differ too)
                                bad_logits, _, _ = compare(ref, steps, *results[(name, B, mode, be)], mode)
                                if bad_logits:
                                    caught += 1
                                elif cfg.f_tol == 0.05:
                                    released_missed.append(f"{name} B={B} {mode} {be}")
                ok = caught > 0 if need == "any" else not released_missed
                print(f"  {label}: {caught} of {total} cases fail{'' if ok else '  SELF-TEST FAIL'}")
                if not ok:
                    why = "no case fails" if need == "any" else "passes " + ", ".join(released_missed)
                    failures.append(f"self-test: perturbing the reference ({label}) is not detected: {why}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"{n_cases - sum(1 for f in failures if not f.startswith('self-test'))} of {n_cases} cases within "
          f"tolerance; {time.time() - t0:.1f} s")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
