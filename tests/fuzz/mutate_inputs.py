#!/usr/bin/python3
"""Mutation fuzzing of every kind of file aoc reads (issue 19).

Takes the bundled valid files of each kind, mutates them deterministically (seeded), runs the
command that reads each, and fails on any of: a crash (a signal), an "internal error", an exit
status other than 0 or 1, an error of more than one line, or a run longer than --timeout seconds.

  /usr/bin/python3 tests/fuzz/mutate_inputs.py build/aoc [--per-kind N] [--seed S] [--timeout T]

Kinds: a hardware file, a graph, a model config, a weights file, a program and its inputs (and
inputs with empty or wrong-rank dimensions), a loop input, a sweep scenario and its results, a
training scenario, optimisation problems, and a released-format safetensors checkpoint (numpy and
h5py). Then a full disk: compile, import, task, run, run --example-input and sweep with every file
they write limited to a random size (RLIMIT_FSIZE), each failing cleanly or writing in full, never
leaving a temporary file or losing the old output. The ctest `fuzz_inputs_ci` runs a CI-sized subset (--per-kind 25). Exit 0: every mutated input was
refused or run cleanly; exit 1: the failures, one line each with a reproducer kept in --keep DIR.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def json_mutations(text, rng):
    """A mutated JSON text: structural attacks first, then random byte edits."""
    doc = None
    try:
        doc = json.loads(text)
    except ValueError:
        pass
    kind = rng.randrange(9)
    if doc is not None and isinstance(doc, dict) and kind < 6:
        keys = list(doc.keys())
        k = rng.choice(keys) if keys else "x"
        if kind == 0:  # deep nesting
            n = rng.choice([300, 5000, 100000])
            return text.rstrip()[:-1] + ', "zz": ' + "[" * n + "]" * n + "}"
        if kind == 1:  # a number beyond a double
            doc[k] = 1e308
            return json.dumps(doc).replace("1e+308", "1e999")
        if kind == 2:  # a duplicate key
            return text.rstrip()[:-1] + ', "%s": 0}' % k
        if kind == 3:  # a value of the wrong kind
            doc[k] = rng.choice([None, "x", -1, 2**63, [], {}, 1e300, -1e300, 0.5])
            return json.dumps(doc)
        if kind == 4:  # huge sizes wherever there is an integer
            s = json.dumps(doc)
            out, i = [], 0
            for tok in s.split(" "):
                t = tok.rstrip(",]}")
                if t.isdigit() and rng.random() < 0.3:
                    tok = tok.replace(t, str(rng.choice([2**32, 2**40, 2**63 - 1, 0])), 1)
                out.append(tok)
            return " ".join(out)
        if kind == 5:  # a key removed
            doc.pop(k, None)
            return json.dumps(doc)
    b = bytearray(text.encode())
    if not b:
        return text
    if kind == 6:  # truncated
        return b[: rng.randrange(len(b))].decode(errors="replace")
    for _ in range(rng.randint(1, 8)):  # byte flips
        b[rng.randrange(len(b))] = rng.randrange(256)
    return b.decode(errors="replace")


def binary_mutations(data, rng):
    b = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        return bytes(b[: rng.randrange(max(1, len(b)))])
    for _ in range(rng.randint(1, 32)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    if kind == 2 and len(b) > 16:  # a safetensors header length or an HDF5 field made huge
        at = rng.randrange(0, min(len(b) - 8, 4096))
        b[at : at + 8] = (2**63 - 1).to_bytes(8, "little")
    return bytes(b)


def empty_dimension_inputs(data, rng):
    """Program inputs of the seed's names and dtypes with a random shape, often with an empty axis
    (0 sequences, 0 tokens) or rank 0 or 3 (h5py)."""
    import io
    import h5py
    import numpy as np
    src = h5py.File(io.BytesIO(data), "r")
    buf = io.BytesIO()
    with h5py.File(buf, "w") as out:
        for name in src:
            d = src[name]
            rank = rng.choice([d.ndim, d.ndim, d.ndim, 0, 1, 3])
            shape = tuple(rng.choice([0, 0, 1, 2, 5]) for _ in range(rank))
            out[name] = np.zeros(shape, dtype=d.dtype)
    return buf.getvalue()


def full_disk(limit_bytes):
    """A preexec_fn: every file the command writes limited to limit_bytes (write() fails with EFBIG,
    the writer's view of a full disk; SIGXFSZ ignored)."""
    import resource
    import signal

    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def verdict(status, err, timeout):
    """Why a run failed the fuzzer (None: it did not): a timeout, a signal, an internal error, an exit
    status other than 0, 1 or CLI11's usage codes, or an error of more than one line."""
    if status is None:
        return "ran past %g s" % timeout
    if status < 0:
        return "killed by signal %d" % -status
    if "internal error" in err:
        return "internal error: " + err.splitlines()[0][:200]
    if status not in (0, 1) and not (100 <= status < 120):  # 1xx: CLI11's own usage errors
        return "exit status %d" % status
    if status == 1 and len([l for l in err.splitlines() if l.startswith("aoc: error")]) != 1:
        return "error not one line: " + err[:200].replace("\n", " | ")
    return None


def seed_files(work, aoc):
    """Writes the seed files aoc makes itself (a program and its inputs from the bundled tiny DEQ, a
    loop input, small sweep and training scenarios, sweep results, a released-format safetensors
    checkpoint); returns their paths by name."""
    graph = os.path.join(ROOT, "models/graphs/tiny-deq.json")
    weights = os.path.join(ROOT, "models/graphs/tiny-deq.h5")
    f = {k: os.path.join(work, v) for k, v in {
        "program": "seed-program.h5", "inputs": "seed-inputs.h5", "loop": "seed-loop.h5", "sweep": "seed-sweep.json",
        "results": "seed-results.h5", "train": "seed-train.json", "ckpt": "seed-model", "st": "seed-model/model.safetensors",
        "problem": "seed-problem.json", "qplib": "seed-problem.qplib"}.items()}
    if os.path.exists(f["program"]):
        return f
    run = lambda *args: subprocess.run([aoc] + list(args), check=True, capture_output=True)
    run("compile", graph, "--weights", weights, "--hw", "aoc-16", "-o", f["program"])
    run("run", f["program"], "--example-input", f["inputs"], "--batch", "2", "--length", "3")
    run("run", "--example-input", f["loop"], "--n", "16", "--batch", "3")
    sweep = {"format": "aoc-sweep", "version": 1, "name": "fuzz",
             "workload": {"config": os.path.join(ROOT, "tests/data/implicit-lm/mamba2-130m-implicit/config.json")},
             "hardware": "aoc-scale", "seed": 1, "sampling": {"method": "lhs", "points": 3}, "fixed": {"seq_len": 16},
             "parameters": {"iterations": {"range": [5, 50]}, "photons_per_sample": {"range": [256, 1000000], "scale": "log"}},
             "metrics": ["iterations", "energy", "latency", "tops_per_w"]}
    with open(f["sweep"], "w") as fh:
        json.dump(sweep, fh, indent=1)
    run("sweep", f["sweep"], "-o", f["results"], "--quiet", "--threads", "1")
    run("problem", "maxcut", "--n", "8", "--seed", "1", "--exhaustive", "-o", f["problem"])
    with open(f["qplib"], "w") as fh:  # maximise a 4-variable box-constrained quadratic (QCB)
        fh.write("FUZZ\nQCB\nmaximize\n4\n3\n1 1 -2\n2 1 1.5\n4 3 -1\n0\n1\n2 0.5\n0.25\n1e30\n0\n1\n3 -1\n1\n1\n4 2\n")
    with open(os.path.join(ROOT, "scenarios/train/parity-implicit.json")) as fh:
        train = json.load(fh)
    train["model"]["max_iter"] = 20
    train["train"].update(length=8, batch=4, steps=2)
    train["eval"].update(lengths=[8], batch=4)
    with open(f["train"], "w") as fh:
        json.dump(train, fh, indent=1)
    try:  # a released-format checkpoint, as tests/reference writes them (needs numpy)
        sys.path.insert(0, os.path.join(ROOT, "tests/reference"))
        import released_lm as R
        import run_released as RR
        os.makedirs(f["ckpt"], exist_ok=True)
        cfg = RR.mamba2_config(RR.RELEASED)
        with open(os.path.join(f["ckpt"], "config.json"), "w") as fh:
            json.dump(cfg, fh, indent=1)
        R.write_safetensors(f["st"], R.random_weights(R.Config(cfg), 1), "F32")
    except ImportError:
        f["st"] = None
    return f


def kinds(work, aoc):
    """(name, seed file, mutate, command builder) for each file kind aoc reads."""
    hw = os.path.join(ROOT, "scenarios/hardware/aoc-48.json")
    graph = os.path.join(ROOT, "models/graphs/tiny-deq.json")
    weights = os.path.join(ROOT, "models/graphs/tiny-deq.h5")
    config = os.path.join(ROOT, "tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json")
    out = os.path.join(work, "out")
    f = seed_files(work, aoc)
    program, inputs = f["program"], f["inputs"]
    k = [
        ("hardware", hw, json_mutations, lambda p: ["hw", "show", p]),
        ("graph", graph, json_mutations, lambda p: ["compile", p, "--shapes-only", "--hw", "aoc-16"]),
        ("config", config, json_mutations, lambda p: ["import", p, "--shapes-only", "-o", out + ".json"]),
        ("weights", weights, binary_mutations, lambda p: ["compile", graph, "--weights", p, "--hw", "aoc-16", "-o", out + ".h5"]),
        ("program", program, binary_mutations, lambda p: ["run", p, "--inputs", inputs, "--backend", "cpu", "-o", out + "-run.h5"]),
        ("program inputs", inputs, binary_mutations, lambda p: ["run", program, "--inputs", p, "--backend", "cpu", "-o", out + "-run.h5"]),
        ("loop input", f["loop"], binary_mutations, lambda p: ["run", p, "--hw", "aoc-16", "--noise", "--quantize", "-o", out + "-loop.h5"]),
        ("sweep scenario", f["sweep"], json_mutations, lambda p: ["sweep", p, "-o", out + "-sweep.h5", "--quiet", "--threads", "1"]),
        ("sweep results", f["results"], binary_mutations, lambda p: ["pareto", p, "--x", "energy", "--y", "latency"]),
        ("train scenario", f["train"], json_mutations, lambda p: ["train", p, "-o", out + "-model"]),
    ]
    small = ["--samples", "4", "--iterations", "10", "--search-configs", "1", "--search-samples", "2", "--search-iterations", "5",
             "--sa-samples", "2", "--sa-sweeps", "2", "--sb-steps", "2", "--quiet"]
    k += [
        ("problem json", f["problem"], json_mutations, lambda p: ["optimize", p, "-o", out + "-opt.h5"] + small),
        ("edge list", os.path.join(ROOT, "tests/data/optimize/maxcut20.txt"), json_mutations,
         lambda p: ["optimize", p, "-o", out + "-opt.h5"] + small),
        ("qplib", f["qplib"], json_mutations, lambda p: ["optimize", p, "--mode", "ideal", "-o", out + "-opt.h5"] + small),
    ]
    k.append(("empty dimensions", inputs, empty_dimension_inputs,
              lambda p: ["check", program, "--inputs", p, "--quantize"]))
    if f["st"]:
        k.append(("safetensors", f["st"], binary_mutations,
                  lambda p: ["import", os.path.join(f["ckpt"], "config.json"), "--weights", p, "-o", out + "-st.json", "--weights-out", out + "-st.h5"]))
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("aoc")
    ap.add_argument("--per-kind", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    if not (os.path.isfile(a.aoc) and os.access(a.aoc, os.X_OK)):
        print("fuzz: %s: no such executable (the aoc binary: build/aoc)" % a.aoc, file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="aoc-fuzz-")
    try:
        kinds(work, a.aoc)  # makes the seed files
    except subprocess.CalledProcessError as e:
        print("fuzz: making the seed program failed: %s: %s" % (" ".join(e.cmd), (e.stderr or b"").decode(errors="replace").strip()),
              file=sys.stderr)
        return 1
    keep = a.keep or os.path.join(work, "failures")
    failures, tried, t0 = [], 0, time.time()
    for name, seed_file, mutate, command in kinds(work, a.aoc):
        binary = mutate is not json_mutations
        with open(seed_file, "rb") as fh:
            original = fh.read()
        rng = random.Random("%d %s" % (a.seed, name))
        for i in range(a.per_kind):
            m = mutate(original, rng) if binary else mutate(original.decode(), rng)
            ext = os.path.splitext(seed_file)[1]
            path = os.path.join(work, "input-%d%s" % (i, ext))
            with open(path, "wb" if binary else "w") as fh:
                fh.write(m)
            cmd = [a.aoc] + command(path)
            tried += 1
            start = time.time()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.timeout)
                status, err, took = r.returncode, r.stderr.strip(), time.time() - start
            except subprocess.TimeoutExpired:
                status, err, took = None, "", a.timeout
            why = verdict(status, err, a.timeout)
            if why:
                os.makedirs(keep, exist_ok=True)
                kept = os.path.join(keep, "%s-%d%s" % (name.replace(" ", "-"), i, ext))
                shutil.copy(path, kept)
                failures.append("%s #%d: %s (reproduce: %s)" % (name, i, why, " ".join(cmd).replace(path, kept)))
    # a full disk: each writer with its files limited to a random size; besides the checks above, no
    # temporary file may be left and a failed write must keep the old output
    f = seed_files(work, a.aoc)
    graph = os.path.join(ROOT, "models/graphs/tiny-deq.json")
    config = os.path.join(ROOT, "tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json")
    disk = os.path.join(work, "disk")
    writers = [
        lambda o: ["compile", graph, "--weights", os.path.join(ROOT, "models/graphs/tiny-deq.h5"), "--hw", "aoc-16", "-o", o],
        lambda o: ["import", config, "-o", o, "--weights-out", o + "2"],
        lambda o: ["task", "parity", "--batch", "16", "--length", "32", "--tokens", o, "--labels", o + "2"],
        lambda o: ["run", f["program"], "--inputs", f["inputs"], "-o", o],
        lambda o: ["run", f["program"], "--example-input", o, "--batch", "8", "--length", "16"],
        lambda o: ["sweep", f["sweep"], "-o", o, "--quiet", "--threads", "1"],
    ]
    rng = random.Random("%d full disk" % a.seed)
    for i in range(a.per_kind):
        shutil.rmtree(disk, ignore_errors=True)
        os.makedirs(disk)
        o = os.path.join(disk, "out")
        for name in (o, o + "2"):
            with open(name, "w") as fh:
                fh.write("old")
        cmd = [a.aoc] + writers[i % len(writers)](o)
        limit = rng.choice([0, 512, 4096, 20000, 60000, 200000])
        tried += 1
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.timeout, preexec_fn=full_disk(limit))
            status, err = r.returncode, r.stderr.strip()
        except subprocess.TimeoutExpired:
            status, err = None, ""
        left = [n for n in os.listdir(disk) if n.endswith(".tmp")]
        kept = all(open(n, "rb").read() == b"old" for n in (o, o + "2") if os.path.exists(n))
        why = verdict(status, err, a.timeout)
        if not why and left:
            why = "temporary file left: " + left[0]
        elif not why and status != 0 and not kept:
            why = "a failed write replaced the old output"
        if why:
            failures.append("full disk #%d (%d bytes): %s (reproduce: ulimit -f %d; %s)" % (i, limit, why, (limit + 511) // 512, " ".join(cmd)))
    print("fuzz: %d mutated inputs over %d kinds and the full disk in %.1f s, %d failures" % (tried, len(kinds(work, a.aoc)), time.time() - t0, len(failures)))
    for f in failures:
        print("FAIL: " + f)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
