"""aocsim: the analog optical computer's simulator, compiler and estimates, from NumPy and PyTorch.

The same C++ as the ``aoc`` command, so results, seeds and digests are the CLI's bit for bit. Its
import name is ``aocsim``: ``aoc`` is Microsoft's digital twin (microsoft/aoc), which loads beside it.
Areas (docs/python.md has a worked example of each):

- machines:  ``machines()``, ``Hardware("aoc-48", set={...})``
- the loop:  ``solve(W, x, ...)`` -- the fixed point of z' = alpha z + beta W f(z) + x + b on the
  simulated core, with every switch of ``aoc run`` (converters, noise, bandwidth, readout, anneal)
- programs:  ``import_config``, ``load_graph``, ``Graph.compile``, ``Program.run / check / estimate``
- sweeps:    ``sweep(scenario)`` and ``read_results(path)`` as pandas DataFrames
- PyTorch:   ``aocsim.torch`` (a fixed-point autograd Function and an AOC layer for hardware-aware
  training) and ``aocsim.twin`` (a model built with Microsoft's digital twin, run on this simulator)

Errors in what you pass (a wrong shape, NaN, an unknown machine or option) raise ``aocsim.Error``, a
ValueError whose message names the field, as the CLI's one-line errors do.
"""

import os as _os
import tempfile as _tempfile

import numpy as _np

from . import _aoc
from ._aoc import Error, Graph, Program, __version__, instruction_sets

__all__ = ["Error", "Graph", "Hardware", "Program", "Result", "__version__", "import_config", "instruction_sets", "load_graph",
           "load_program", "machines", "random_problem", "read_results", "solve", "sweep", "task"]


class Result(dict):
    """A run's results: a dict whose keys are also attributes (``r.z`` is ``r["z"]``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self):
        return list(self.keys()) + list(super().__dir__())


def _overrides(set):
    """Hardware overrides as the CLI's --set takes them: a dict {"noise.thermal_sigma": 0.005} or a
    list of "section.field=value" strings."""
    if set is None:
        return []
    if isinstance(set, dict):
        return [f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in set.items()]
    if isinstance(set, str):
        return [set]
    return [str(s) for s in set]


def machines():
    """The bundled machines' names (``aoc hw list``): e.g. ['aoc-16', 'aoc-48', 'aoc-scale']."""
    return _aoc.bundled_machines()


class Hardware:
    """A machine description: a bundled name or a hardware JSON file, with overrides.

    >>> hw = Hardware("aoc-48", set={"noise.thermal_sigma": 0.005})
    >>> hw.channels, hw.section("converters")["adc_bits"]["value"]
    """

    def __init__(self, machine="aoc-48", set=None):
        self.machine = str(machine)
        self.overrides = _overrides(set)
        self.path = _aoc.resolve_hardware_path(self.machine)
        self._doc = _aoc.hardware_json(self.path, self.overrides)  # validated as aoc loads it

    @property
    def name(self):
        return self._doc["name"]

    @property
    def channels(self):
        return int(self._doc["channels"])

    @property
    def sections(self):
        """The file's top-level keys, in file order."""
        return list(self._doc.keys())

    def section(self, name):
        """One section of the file (overrides applied) as a dict; an unknown name raises aocsim.Error."""
        if name not in self._doc:
            raise Error(f"{self.path}: {name}: no such section (the file has: {', '.join(self._doc)})")
        return self._doc[name]

    def to_dict(self):
        """The whole description, overrides applied, as JSON-like dicts."""
        return self._doc

    def with_overrides(self, set):
        """A copy with more overrides on top (later ones win)."""
        return Hardware(self.path, self.overrides + _overrides(set))

    def __str__(self):
        return _aoc.describe_hardware(self.path, self.overrides)

    def __repr__(self):
        extra = f", set={self.overrides}" if self.overrides else ""
        return f"Hardware({self.machine!r}{extra})"


def _array(a):
    """A NumPy view of a NumPy array or a CPU torch tensor (no copy), else np.asarray."""
    if hasattr(a, "detach") and hasattr(a, "numpy"):  # torch.Tensor
        a = a.detach()
        if a.device.type != "cpu":
            raise Error("solve: a tensor on " + str(a.device) + ": the simulator reads host memory (move it with .cpu())")
        return a.numpy()
    return _np.asarray(a)


def _hardware_name(hw):
    return hw.path if isinstance(hw, Hardware) else str(hw)


def _hardware_set(hw, set):
    return (hw.overrides if isinstance(hw, Hardware) else []) + _overrides(set)


def solve(W, x, bias=None, z0=None, *, hw="aoc-48", set=None, mode="default", alpha=None, beta=None, gamma=None, rule="twin",
          tol=1e-3, max_iter=40, damping=1.0, precision="f32", quantize=False, noise=False, bandwidth=False,
          hardware_readout=False, anneal=None, seed=1, threads=1, first_sample=0, trace=False, floor_patience=8,
          program_seed=None, zero_reads=1024, after_programming_us=None, zero_every_us=None):
    """Solve the loop's fixed points on the simulated core, as ``aoc run`` does.

    W: (N, N) weights in AOC convention; x: (B, N) inputs (or (N,) for one sample); bias: (N,);
    z0: (B, N) starting states (zeros). NumPy arrays or CPU torch tensors, float32 or float64: when
    all are C-contiguous and of one of those dtypes they are read where they lie (``borrowed`` is
    True in the result); anything else is converted to float64 first.

    hw: a bundled machine, a file, or a Hardware; set: overrides (dict or "section.field=value" list).
    mode: "default" (the machine as calibrated), "all-off" (every non-ideality off) or "ideal"
    (z' = alpha z + beta tanh(z) W + x + b). alpha: a number overrides the mode's (as --alpha); a
    sequence gives one per channel. beta: the gain (one or N values; see docs/physics.md). gamma: momentum.
    rule: "twin", "relative" or "fixed"; tol, max_iter, damping as the CLI's flags. precision: "f32"
    or "f64". quantize: SLM codes, DAC and ADC; noise: the machine's noise; bandwidth: finite loop
    bandwidth; hardware_readout: settle, then average the ADC window; anneal: "linear:START:END:ITERS"
    or "exp:START:END:ITERS". seed, first_sample: the noise keys; threads: results do not depend on it.
    program_seed: the SLM's programming errors (its fixed pattern, the chip as written) keyed apart
    from the read noise: one program_seed under several seeds is one chip under fresh read noise
    (None: the noise seed, a new chip per seed; ``--program-seed``). zero_reads: with noise, the
    auto-zero after each programming (``--zero-reads``, docs/physics.md; 0: none). after_programming_us:
    with noise, the solve this long after the programming (``--after-programming-us``; None: the
    programming has no moment on the clock). zero_every_us: with after_programming_us, the auto-zero
    taken again this often (``--zero-every-us``; None: the programming's only).
    floor_patience: with noise (twin and relative rules), a sample whose residual has not fallen under
    0.9 of its lowest for this many steps stops at its noise floor, its fixed point the mean of those
    iterates (``at_floor`` in the result; 0: off).

    Returns a Result: z (B, N) fixed points, readout (B, N), iterations, converged, at_floor, residual, settled,
    finite (per sample), steps, max_residual (per step), with trace residual_trace and state_trace,
    with quantize slm_codes, slm_scale, dac_codes, adc_codes; output_digest (the CLI's "digest of the
    output arrays"), fixed_point_digest, config_hash, borrowed, hardware.
    """
    W, x = _array(W), _array(x)
    single = x.ndim == 1
    if single:
        x = x.reshape(1, -1)
    s = _aoc.LoopSettings()
    s.hw, s.set, s.mode, s.rule, s.precision = _hardware_name(hw), _hardware_set(hw, set), mode, rule, precision
    s.tol, s.max_iter, s.damping, s.threads, s.first_sample, s.seed = float(tol), int(max_iter), float(damping), int(threads), \
        int(first_sample), int(seed)
    s.floor_patience = int(floor_patience)
    s.program_seed = None if program_seed is None else int(program_seed)
    s.zero_reads = int(zero_reads)
    s.after_programming_us = None if after_programming_us is None else float(after_programming_us)
    s.zero_every_us = None if zero_every_us is None else float(zero_every_us)
    s.quantize, s.noise, s.bandwidth, s.hardware_readout, s.trace = bool(quantize), bool(noise), bool(bandwidth), \
        bool(hardware_readout), bool(trace)
    s.anneal = anneal or ""
    c = _aoc.LoopCoefficients()
    if alpha is not None:
        if _np.ndim(alpha) == 0:
            s.alpha = float(alpha)
        else:
            c.alpha = [float(v) for v in _np.ravel(_array(alpha))]
    if beta is not None:
        c.beta = [float(v) for v in _np.ravel(_array(beta))]
    if gamma is not None:
        c.gamma = float(gamma)
    r = Result(_aoc.solve(W, x, None if bias is None else _array(bias), None if z0 is None else _array(z0), s, c))
    if trace:  # state_trace as `aoc run` writes it: (steps, B, N)
        r["state_trace"] = r["state_trace"].reshape(r["residual_trace"].shape + (x.shape[1],))
    if single:
        r["z"], r["readout"] = r["z"][0], r["readout"][0]
    return r


def random_problem(n, batch, seed=1, first_sample=0):
    """The seeded weights and inputs of ``aoc run --example-input`` / ``aoc loop``: a dict of W (N, N),
    x (B, N), bias (N,), z0 (B, N)."""
    return Result(_aoc.random_problem(int(n), int(batch), int(seed), int(first_sample)))


def read_run_input(path):
    """A loop input file (``aoc run``'s HDF5: /W, /x, /bias, /z0, attributes alpha, beta, gamma)."""
    return Result(_aoc.read_run_input(str(path)))


def import_config(config, seed=1, weights=None, shapes_only=False, tol=None):
    """A model's config.json as a Graph (``aoc import``): a published implicit model's Hugging Face
    config or a model folder of ``aoc train``; seeded random weights, a checkpoint's (weights:
    .safetensors or its index .json, or an aoc weights .h5), or none (shapes_only). tol: every fixed
    point solved to it instead of the config's f_tol (``aoc import --tol``)."""
    return _aoc.import_config(str(config), int(seed), str(weights or ""), bool(shapes_only), None if tol is None else float(tol))


def task(name, batch, length, seed=1, split="test"):
    """A seeded batch of a state-tracking task (``aoc task``): a Result with tokens [batch, length]
    (a trained model's input) and labels (for ``Program.check(labels=...)``). name: parity, count:M,
    s3, a5, s5, a5xm; split: test (the default), calibration (for ``compile(calibrate=...)``), train
    or eval; no two splits share a sequence."""
    return Result(_aoc.task(str(name), int(batch), int(length), int(seed), str(split)))


def load_graph(graph, weights=None):
    """A graph JSON (docs/ir.md) and its weights HDF5 (default: the graph's path with .h5 when it exists)."""
    graph = str(graph)
    if weights is None:
        beside = _os.path.splitext(graph)[0] + ".h5"
        weights = beside if _os.path.isfile(beside) else ""
    return _aoc.Graph.load(graph, str(weights))


def load_program(path):
    """A compiled program file (``aoc compile -o``)."""
    return _aoc.Program.load(str(path))


# The default window of a program's noise floor: the C++ settings' own (SolverOptions::kNoisyPatience).
_FLOOR_PATIENCE = _aoc.ProgramSettings().floor_patience


def _program_settings(quantize, noise, ideal_optics, precision, light_map, set, seed, threads, sequence, trace, program_seed=None,
                      write_verify=0.0, verify_rounds=8, zero_reads=1024, after_programming_us=None, floor_patience=_FLOOR_PATIENCE,
                      zero_every_us=None):
    s = _aoc.ProgramSettings()
    s.quantize, s.noise, s.ideal_optics, s.trace = bool(quantize), bool(noise), bool(ideal_optics), bool(trace)
    s.precision, s.light_map, s.sequence = precision, light_map, sequence
    s.set, s.seed, s.threads = _overrides(set), int(seed), int(threads)
    s.program_seed = None if program_seed is None else int(program_seed)
    s.write_verify, s.verify_rounds, s.zero_reads = float(write_verify), int(verify_rounds), int(zero_reads)
    s.after_programming_us = None if after_programming_us is None else float(after_programming_us)
    s.zero_every_us = None if zero_every_us is None else float(zero_every_us)
    s.floor_patience = int(floor_patience)
    return s


def _inputs(inputs):
    return {k: _array(v) for k, v in inputs.items()}


def _program_run(self, inputs, backend="sim", *, quantize=False, noise=False, ideal_optics=False, precision="f32",
                 light_map="auto", set=None, seed=1, threads=1, sequence="simultaneous", first_sample=0, trace=False,
                 program_seed=None, write_verify=0.0, verify_rounds=8, zero_reads=1024, after_programming_us=None,
                 floor_patience=_FLOOR_PATIENCE, zero_every_us=None):
    """Run the program on inputs {name: array} (``aoc run PROG``). backend: "sim" (the simulated
    machine), "cpu" (the exact digital reference), "cuda" or "cuda-f32". The sim backend's switches:
    quantize (SLM codes and every DAC/ADC), noise, ideal_optics, precision ("f32", "f64"), light_map,
    set (run-time overrides: noise.*, timing.*, converter bits), seed, program_seed (the SLM's
    programming errors apart from the read noise, as ``aoc run --program-seed``), write_verify and
    verify_rounds (``--write-verify``: each SLM pixel written again while off by more than that
    fraction; counters["slm_rewrites"] counts them), zero_reads (``--zero-reads``: the auto-zero after
    each programming; 0: none), after_programming_us (``--after-programming-us``: the run this long after
    the programming, the auto-zero then taking the slow noise of its moment out too), zero_every_us
    (``--zero-every-us``: that auto-zero taken again this often), floor_patience
    (``--floor-patience``: with noise, a fixed point whose residual stopped falling for this many steps
    ends with the mean of those iterates; 0: off). sequence: "simultaneous" or
    "sequential". Returns a Result: outputs {name: float64 array}, fixed_points [{op, iterations,
    converged, at_floor}] (shape [B], or [B, L] sequential; at_floor: stopped at the noise floor), counters (DAC/ADC conversions and clips), precision."""
    s = _program_settings(quantize, noise, ideal_optics, precision, light_map, set, seed, threads, sequence, trace, program_seed,
                          write_verify, verify_rounds, zero_reads, after_programming_us, floor_patience, zero_every_us)
    r = Result(self._run(_inputs(inputs), backend, s, int(first_sample)))
    r["fixed_points"] = [Result(f) for f in r["fixed_points"]]
    return r


def _program_check(self, inputs, *, labels=None, seeds=1, quantize=True, noise=True, ideal_optics=False, precision="f32",
                   light_map="auto", set=None, seed=1, threads=1, sequence="simultaneous", program_seed=None, write_verify=0.0,
                   verify_rounds=8, zero_reads=1024, after_programming_us=None, floor_patience=_FLOOR_PATIENCE, zero_every_us=None):
    """The simulated machine against the exact reference (``aoc check``): runs the cpu backend once and
    the sim backend on `seeds` noise seeds from `seed`; returns each figure's mean, sd, min and max:
    max_abs, max_rel, argmax (agreement of each position's decision), codes (ADC codes), failures,
    iterations, iterations_differ. With labels (``aoc check --labels``; ``task(...)["labels"]``):
    accuracy, accuracy_last and accuracy_whole of the simulator over the seeds, and the reference's
    reference_accuracy and reference_accuracy_last. program_seed: one programmed chip under the
    seeds' read noise (``aoc check --program-seed``; None: a new chip per seed). write_verify,
    verify_rounds: as ``aoc check --write-verify``; zero_reads: as ``--zero-reads``; after_programming_us: as
    ``--after-programming-us``; zero_every_us: as ``--zero-every-us``; floor_patience: as ``--floor-patience``."""
    s = _program_settings(quantize, noise, ideal_optics, precision, light_map, set, seed, threads, sequence, False, program_seed,
                          write_verify, verify_rounds, zero_reads, after_programming_us, floor_patience, zero_every_us)
    return Result(self._check(_inputs(inputs), int(seeds), s, None if labels is None else _array(labels)))


def _program_estimate(self, *, iterations=None, seq_len=1024, set=None):
    """Energy and latency per token and per sequence (``aoc estimate PROG --json``), every line with
    its source. iterations: K per FixedPoint (default: each one's max_iter, an upper bound)."""
    return Result(self._estimate(iterations, int(seq_len), _overrides(set)))


def _program_save(self, path):
    """Write the program file (``aoc compile -o``), atomically."""
    self._save(_os.fspath(path))


def _graph_save(self, graph, weights=None):
    """Write the graph JSON and, when given, its weights HDF5 (``aoc import -o``), each atomically."""
    self._save(_os.fspath(graph), _os.fspath(weights) if weights is not None else "")


Program._run, Program._check, Program._estimate, Program._save = Program.run, Program.check, Program.estimate, Program.save
Program.run, Program.check, Program.estimate, Program.save = _program_run, _program_check, _program_estimate, _program_save
Graph._save, Graph.save = Graph.save, _graph_save
Program.__repr__ = lambda self: f"<aocsim.Program {self.name!r} for {self.hardware}, passes {', '.join(self.passes)}>"
Graph.__repr__ = lambda self: f"<aocsim.Graph {self.name!r}: inputs {[n for n, _ in self.inputs]}, {len(self.weight_names)} weights>"


def _frame(results):
    import pandas as pd
    df = pd.DataFrame(results["columns"]).set_index("index")
    df.attrs.update(results["attrs"])
    return df


def read_results(path):
    """A sweep's results file (``aoc sweep -o``) as a pandas DataFrame, one row per point (index: the
    point's index), its parameters, metrics, seed and status; df.attrs holds the scenario, config
    hash, tool version, seed and each metric's (unit, better)."""
    return _frame(_aoc.read_results(str(path)))


def sweep(scenario, output=None, *, threads=0, resume=False):
    """Run a sweep scenario (``aoc sweep``) and return its results as a DataFrame (read_results).
    output: where the results HDF5 goes (default: a temporary file, removed after reading)."""
    if output is not None:
        _aoc.run_sweep(str(scenario), str(output), int(threads), bool(resume))
        return read_results(output)
    with _tempfile.TemporaryDirectory(prefix="aoc-sweep-") as d:
        path = _os.path.join(d, "results.h5")
        _aoc.run_sweep(str(scenario), path, int(threads), False)
        return read_results(path)


def optimize(problem, h=None, binary=None, *, hw="aoc-48", set=None, mode="default", quantize=False, noise=False, samples=200,
             iterations=500, dt=0.5, params=None, search_configs=32, search_samples=16, search_iterations=100, sa_sweeps=200,
             sa_samples=200, sb_steps=200, best_known=None, seed=1, threads=1):
    """Solve an optimisation problem on the simulated machine's loop, as ``aoc optimize`` does
    (docs/optimisation.md). problem: a file (aoc's JSON from ``aoc problem``, a G-set edge list, a
    .qplib), or J, an n x n symmetric array (minimise -(1/2) s'Js - h's) with the field h and the
    binary flags (default: every variable binary; 0 marks a continuous one in [-1, 1]). The machine
    and switches as aocsim.solve takes them; params=(a, g, m) skips the search; best_known sets the
    target p counts samples at. Returns a dict: the summary ``aoc optimize --json`` prints (p, ops,
    machine time and energy to 99 %, the baselines), plus "objectives" (every sample's) and
    "best_state" as NumPy arrays."""
    s, loop = _aoc.OptimizeSettings(), _aoc.LoopSettings()
    loop.hw, loop.set, loop.mode = _hardware_name(hw), _hardware_set(hw, set), mode
    loop.quantize, loop.noise, loop.seed, loop.threads = bool(quantize), bool(noise), int(seed), int(threads)
    s.loop = loop
    s.samples, s.iterations, s.dt = int(samples), int(iterations), float(dt)
    s.search_configs, s.search_samples, s.search_iterations = int(search_configs), int(search_samples), int(search_iterations)
    s.sa_sweeps, s.sa_samples, s.sb_steps = int(sa_sweeps), int(sa_samples), int(sb_steps)
    if isinstance(problem, (str, _os.PathLike)):
        path, J = str(problem), None
    else:
        path, J = "", _np.ascontiguousarray(problem, dtype=_np.float64)
        h = None if h is None else _np.ascontiguousarray(h, dtype=_np.float64)
    flags = [] if binary is None else [int(bool(b)) for b in binary]
    summary, objectives, best = _aoc.optimize(path, J, h, flags, s, None if params is None else [float(v) for v in params],
                                              None if best_known is None else float(best_known))
    summary["objectives"], summary["best_state"] = objectives, best
    return summary
