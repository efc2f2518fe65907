"""aocsim.torch: the simulated machine inside PyTorch models.

- ``Machine``: a machine and the switches of ``aocsim.solve`` (mode, noise, converters, precision, stop
  rule) that a layer's forward pass runs on; with noise, each call draws new noise (seed, seed+1, ...).
  With ``optics="measured"`` or ``"ideal"`` each solve runs as the layer's compiled program instead,
  the machine ``aoc compile`` and ``aoc run`` give.
- ``FixedPoint``: a ``torch.autograd.Function``. Forward: the machine's fixed point (what its readout
  gives) of z = alpha z + tanh(z) W + x + b. Backward: through the loop's digital model at that fixed
  point, by implicit differentiation (solving u = g + J^T u) or the phantom gradient (backpropagating
  through a few damped steps from it); the machine's non-idealities are in the forward pass only.
- ``AOCLayer``: an ``nn.Module`` holding the weights W, bias b, leak alpha and gain beta, for
  hardware-aware training: ``y = FixedPoint(x, beta W, b, alpha)``.
- ``convert(module, machine)``: every nn.Linear of a model replaced by an ``AnalogLinear`` whose product
  runs as a compiled program on the machine (aocsim/convert.py), as aihwkit's convert_to_analog.
- ``export(module, example_inputs, path)``: a trained module (Linear layers, activations, AOCLayers)
  written as an aoc graph and its weights (aocsim/export.py), to compile for a machine.

docs/python.md shows a model trained through the noisy machine beside one trained digitally.
"""

import math
import warnings

import numpy as np
import torch
from torch import nn

import aocsim

from .convert import AnalogConv2d, AnalogLinear, convert
from .export import export

__all__ = ["AOCLayer", "AnalogConv2d", "AnalogLinear", "FixedPoint", "Machine", "convert", "export", "loop_step"]


def loop_step(z, x, W, bias, alpha):
    """One step of the loop's digital model: alpha z + tanh(z) W + x + b (rows are samples; W in
    AOC convention, out_j = sum_i tanh(z_i) W_ij; W already carries the gain beta)."""
    return alpha * z + torch.tanh(z) @ W + x + bias


class Machine:
    """The simulated machine a layer runs on.

    hw: a bundled machine, a file or an aocsim.Hardware; set: overrides. mode: "default" (the machine as
    calibrated: LED curves, the electronics' sigmoid, crosstalk, closed loop), "all-off" or "ideal"
    (the exact loop). noise, quantize, precision, rule, tol, max_iter, damping, bandwidth, threads:
    as aocsim.solve. seed: the first noise seed; with advance_seed (default) every solve uses the next
    one, so training sees fresh noise each step and a run is still reproducible from its seed.
    program_seed: hold one chip fixed: the SLM's programming errors (its fixed pattern) are drawn from
    it at every solve, so advance_seed then draws fresh read noise on the same programmed chip (None:
    each seed programs a new chip, as aihwkit's programming noise redrawn with the read noise).
    zero_reads: with noise, the auto-zero after each programming (as aocsim.solve; 0: none).
    after_programming_us: with noise, every solve this long after its programming (the drift and 1/f
    noise then moved away from the auto-zero's; as aocsim.solve; None: no moment on the clock).
    zero_every_us: with after_programming_us, the auto-zero taken again this often (as aocsim.solve).

    optics: None (the loop core above, the twin's machine: `mode` picks its non-idealities), or
    "measured" / "ideal": each solve runs as a compiled program, the machine `aoc compile` and `aoc run`
    give (the layer's loop compiled for hw: tiles programmed for the measured chain, then run on the sim
    backend with the machine as measured or ideal optics, ``--ideal-optics``). A model trained so and
    exported (``export``), compiled and run with ``aoc run`` computes what it computed here: the same
    graph, tiles, converters and noise streams (docs/python.md). The layer's loop is compiled again
    whenever its weights change.
    """

    def __init__(self, hw="aoc-48", *, set=None, mode="default", noise=False, quantize=False, precision="f32", rule="twin",
                 tol=1e-3, max_iter=40, damping=1.0, bandwidth=False, seed=1, advance_seed=True, threads=1, program_seed=None,
                 zero_reads=1024, optics=None, after_programming_us=None, zero_every_us=None):
        if optics not in (None, "measured", "ideal"):
            raise aocsim.Error(f"Machine: optics {optics!r}: give \"measured\" (the machine as measured), \"ideal\" (ideal optics) or None (the loop core)")
        if optics is not None and mode != "default":
            raise aocsim.Error(f"Machine: mode {mode!r} is the loop core's; a compiled program's optics are optics=\"measured\" or \"ideal\"")
        self.optics = optics
        self._compiled = {}  # (n, leak) -> the layer's graph; and the last program with its weights
        self.hw = hw if isinstance(hw, aocsim.Hardware) else aocsim.Hardware(hw, set)
        if isinstance(hw, aocsim.Hardware) and set is not None:
            self.hw = hw.with_overrides(set)
        self.mode, self.noise, self.quantize, self.precision = mode, bool(noise), bool(quantize), precision
        self.rule, self.tol, self.max_iter, self.damping, self.bandwidth = rule, tol, max_iter, damping, bool(bandwidth)
        self.seed, self.advance_seed, self.threads = int(seed), bool(advance_seed), int(threads)
        self.program_seed = None if program_seed is None else int(program_seed)
        self.zero_reads = int(zero_reads)
        self.after_programming_us = None if after_programming_us is None else float(after_programming_us)
        self.zero_every_us = None if zero_every_us is None else float(zero_every_us)
        self.calls = 0
        # How the machine sets its gain (the twin's normalise_matrix): the product is (s/N) t W / max|W|
        # with s from beta, so beta = N max|W| gives t W; without it, the gain is max|W| (t W as is).
        self.normalise = bool(self.hw.section("defaults").get("normalise_matrix", True)) if mode != "ideal" else False

    def _gain(self, W):
        if self.mode == "ideal":
            return [1.0]
        if self.normalise:
            return [float(W.shape[0] * np.abs(W).max())]
        return None

    def solve(self, x, W, bias, alpha):
        """The fixed points z (B, N) of alpha z + tanh(z) W + x + b on the machine (its readout), as a
        tensor of x's dtype on x's device (computed on the CPU); the aocsim.solve Result is kept as
        last_result. Solves that did not converge are counted in a RuntimeWarning."""
        self.check_width(W.shape[-1])
        xn, Wn, bn = (t.detach().cpu().contiguous().numpy() for t in (x, W, bias))
        an = [float(a) for a in torch.as_tensor(alpha).detach().reshape(-1).cpu()]
        if len(an) == 1 and Wn.shape[0] != 1:
            an = an * Wn.shape[0]
        seed = self.next_seed()
        if self.optics is not None:
            return self._program_solve(x, xn, Wn, bn, np.asarray(an, dtype=np.float64), seed)
        r = aocsim.solve(Wn, xn, bn, hw=self.hw, mode=self.mode, alpha=an, beta=self._gain(Wn), rule=self.rule, tol=self.tol,
                      max_iter=self.max_iter, damping=self.damping, precision=self.precision, quantize=self.quantize,
                      noise=self.noise, bandwidth=self.bandwidth, seed=seed, threads=self.threads,
                         program_seed=self.program_seed, zero_reads=self.zero_reads, after_programming_us=self.after_programming_us,
                         zero_every_us=self.zero_every_us)
        self.last_result = r
        self._warn_unsettled(r.converged, r.at_floor, "", stacklevel=4)
        return torch.from_numpy(np.ascontiguousarray(r.readout)).to(device=x.device, dtype=x.dtype)

    def __getstate__(self):
        # compiled programs are a cache of the simulator's objects: a copy or a pickle compiles again when it runs
        state = dict(self.__dict__)
        state["_compiled"] = {}
        state.pop("last_result", None)
        return state

    def compiled(self, key, build, example_shape, weights, calibrate=None, owner=None):
        """A program compiled for this machine from the module ``build()`` gives (built and exported once
        per key, its example input of example_shape, torch's layout) with the weights {name: array} set; compiled again only when they or calibrate (sample
        inputs for the converters' ranges, ``compile(calibrate=...)``) change. Each owner (default: the
        key; a layer passes itself) keeps its last program."""
        import os
        import tempfile
        if key not in self._compiled:
            with tempfile.TemporaryDirectory(prefix="aoc-machine-") as tmp, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._compiled[key] = export(build(), torch.zeros(*example_shape, dtype=torch.float64), os.path.join(tmp, "g.json"))
        graph = self._compiled[key]
        weights = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        cal = None if calibrate is None else np.asarray(calibrate, dtype=np.float64)
        slot = ("program", key if owner is None else id(owner))
        last = self._compiled.get(slot)
        same_cal = last is not None and (last[2] is None if cal is None else last[2] is not None and np.array_equal(cal, last[2]))
        if last is None or last[0] != key or not same_cal or any(not np.array_equal(last[1][k], v) for k, v in weights.items()):
            for k, v in weights.items():
                graph.set_weight(k, v)
            program = graph.compile(self.hw.path, set=self.hw.overrides, calibrate=cal)
            last = (key, {k: v.copy() for k, v in weights.items()}, None if cal is None else cal.copy(), program)
            self._compiled[slot] = last
        return last[3]

    def program(self, W, bias, alpha):
        """The layer's loop z <- alpha z + tanh(z) W + u, u = x + b, compiled for this machine (the graph
        ``export`` writes for an AOCLayer with these weights); compiled again only when they change."""
        n = int(W.shape[-1])
        leak = bool(np.any(alpha != 0))

        def layer():  # one AOCLayer, as export writes it, with this machine's stop rule (its shape pass on the exact loop)
            shadow = Machine(mode="ideal", precision="f64", rule=self.rule, tol=self.tol, max_iter=self.max_iter, damping=self.damping)
            return nn.Sequential(AOCLayer(n, shadow, alpha=0.5 if leak else 0.0, dtype=torch.float64))  # placeholder weights

        weights = {"0.W": W, "0.bias": bias}
        if leak:
            weights["0.alpha"] = alpha
        return self.compiled(("loop", n, leak), layer, (1, n), weights)

    def run(self, program, x, seed):
        """A program run on the sim backend with this machine's switches, on x (an array); the Result."""
        r = program.run({program.inputs[0][0]: np.asarray(x, dtype=np.float64)}, backend="sim", quantize=self.quantize, noise=self.noise,
                        ideal_optics=self.optics == "ideal", precision=self.precision, seed=seed, threads=self.threads,
                        program_seed=self.program_seed, zero_reads=self.zero_reads, after_programming_us=self.after_programming_us,
                         zero_every_us=self.zero_every_us)
        self.last_result = r
        return r

    def next_seed(self):
        """The noise seed of the next call: seed, seed + 1, ... with advance_seed, else seed."""
        seed = self.seed + (self.calls if self.advance_seed else 0)
        self.calls += 1
        return seed

    def _program_solve(self, x, xn, Wn, bn, an, seed):
        program = self.program(Wn, bn, an)
        r = self.run(program, xn, seed)
        fp = r.fixed_points[0]
        self._warn_unsettled(fp.converged, fp.at_floor, f" (compiled, {self.optics} optics)", stacklevel=5)
        return torch.from_numpy(np.ascontiguousarray(r.outputs[program.outputs[0]])).to(device=x.device, dtype=x.dtype)

    def _warn_unsettled(self, converged, at_floor, where, stacklevel):
        # a noisy solve that stopped at its noise floor settled as far as the noise lets it: not a failure
        settled = np.asarray(converged, dtype=bool) | np.asarray(at_floor, dtype=bool)
        if settled.size and not settled.all():
            warnings.warn(f"aocsim.torch: {int((~settled).sum())} of {settled.size} solves on {self.hw.name}{where} did not converge "
                          f"within {self.max_iter} iterations (rule {self.rule}, tol {self.tol:g}) nor reach a noise floor; their "
                          "readout is the last iterate: raise max_iter.", RuntimeWarning, stacklevel=stacklevel)

    def check_width(self, n):
        """A state of n channels fits the machine's core, or aocsim.Error names the width."""
        if int(n) > self.hw.channels:
            raise aocsim.Error(f"width {int(n)}: more than the {self.hw.channels} channels of {self.hw.name} (one core runs one loop; "
                               "use a machine with more channels, e.g. aoc-scale)")

    def __repr__(self):
        on = [k for k in ("noise", "quantize", "bandwidth") if getattr(self, k)]
        how = f"mode {self.mode}" if self.optics is None else f"compiled, {self.optics} optics"
        return f"Machine({self.hw.name}, {how}, {self.precision}{', ' + ', '.join(on) if on else ''})"


class FixedPoint(torch.autograd.Function):
    """z* = FixedPoint.apply(x, W, bias, alpha, machine, backward="implicit", steps=30, damping=1.0, tol=1e-6)

    Forward: the machine's fixed point of z = alpha z + tanh(z) W + x + b (``Machine.solve``).
    Backward, at z*, through the loop's digital model f (``loop_step``):
      "implicit": the gradient g is mapped by (I - J)^-T, J = df/dz at z*: u = g + J^T u is iterated
                  (at most `steps` times, until its relative change is below tol), then u is
                  backpropagated through one step f(z*);
      "phantom":  backpropagation through `steps` damped steps z <- (1-damping) z + damping f(z)
                  started at z* (Geng et al. 2021's phantom gradient; a few steps suffice).
    """

    @staticmethod
    def forward(ctx, x, W, bias, alpha, machine, backward="implicit", steps=30, damping=1.0, tol=1e-6):
        if backward not in ("implicit", "phantom"):
            raise aocsim.Error(f"backward: expected implicit or phantom, got {backward!r}")
        z = machine.solve(x, W, bias, alpha)
        ctx.save_for_backward(x, W, bias, alpha, z)
        ctx.how = (backward, int(steps), float(damping), float(tol))
        return z

    @staticmethod
    def backward(ctx, grad):
        x, W, bias, alpha, z = ctx.saved_tensors
        backward, steps, damping, tol = ctx.how
        with torch.enable_grad():
            params = [t.detach().requires_grad_(need) for t, need in zip((x, W, bias, alpha), ctx.needs_input_grad[:4])]
            if backward == "implicit":
                zq = z.detach().requires_grad_(True)
                f = loop_step(zq, *params)
                u = grad
                for _ in range(steps):
                    (ju,) = torch.autograd.grad(f, zq, u, retain_graph=True)
                    nxt = grad + ju
                    done = (nxt - u).norm() <= tol * (nxt.norm() + 1e-30)
                    u = nxt
                    if done:
                        break
                wanted = [p for p in params if p.requires_grad]
                got = iter(torch.autograd.grad(f, wanted, u, allow_unused=True)) if wanted else iter(())
            else:
                zk = z.detach()
                for _ in range(steps):
                    zk = (1 - damping) * zk + damping * loop_step(zk, *params)
                wanted = [p for p in params if p.requires_grad]
                got = iter(torch.autograd.grad(zk, wanted, grad, allow_unused=True)) if wanted else iter(())
            grads = [next(got) if p.requires_grad else None for p in params]
        return (*grads, None, None, None, None, None)


class AOCLayer(nn.Module):
    """An AOC layer: y = the fixed point of z = alpha z + beta tanh(z) W + x + b on a machine.

    n: the state size (at most the machine's channels); W ~ U(+-1/sqrt(n)) (a torch Linear's init),
    b = 0, alpha (the leak, one per channel) and beta (the gain, one number) trainable. machine: where
    the forward pass runs (default: the ideal loop in float64, exact and noiseless; pass a noisy
    Machine for hardware-aware training). backward: "implicit" or "phantom" (FixedPoint).
    contraction: None, or c in (0, 1): the loop's matrix is scaled (differentiably) so that
    max|alpha| + ||beta W||_2 <= c, which makes the loop a contraction of factor c (tanh is
    1-Lipschitz), so the exact loop converges whatever training does to W; a leak of c or more is
    an error. ``loop_weight()`` is that matrix: what the forward pass and ``export`` program.
    """

    def __init__(self, n, machine=None, *, alpha=0.5, beta=1.0, backward="implicit", steps=None, damping=None, dtype=torch.float32,
                 contraction=None):
        super().__init__()
        self.n = int(n)
        bound = 1 / math.sqrt(self.n)
        self.weight = nn.Parameter(torch.empty(self.n, self.n, dtype=dtype).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(self.n, dtype=dtype))
        self.alpha = nn.Parameter(torch.full((self.n,), float(alpha), dtype=dtype))
        self.beta = nn.Parameter(torch.tensor(float(beta), dtype=dtype))
        self.machine = machine if machine is not None else Machine(mode="ideal", precision="f64", rule="relative", tol=1e-9, max_iter=500)
        self.machine.check_width(self.n)
        self.backward_mode = backward
        self.steps = steps if steps is not None else (30 if backward == "implicit" else 5)
        self.damping = damping if damping is not None else (1.0 if backward == "implicit" else 0.5)
        if contraction is not None and not 0 < float(contraction) < 1:
            raise aocsim.Error(f"AOCLayer: contraction {contraction}: give a factor in (0, 1), or None")
        self.contraction = None if contraction is None else float(contraction)

    def loop_weight(self):
        """The matrix the loop multiplies by, beta W, scaled under the contraction bound when one is set."""
        W = self.beta * self.weight
        if self.contraction is None:
            return W
        room = self.contraction - self.alpha.abs().max()
        if room <= 0:
            raise aocsim.Error(f"AOCLayer: the leak max|alpha| = {float(self.alpha.abs().max()):.4g} leaves no room under "
                               f"contraction {self.contraction:g}: lower alpha or raise the factor")
        norm = torch.linalg.matrix_norm(W, ord=2)
        return W * torch.clamp(room / norm, max=1.0)

    def forward(self, x):
        return FixedPoint.apply(x, self.loop_weight(), self.bias, self.alpha, self.machine, self.backward_mode, self.steps,
                                self.damping)

    def extra_repr(self):
        c = "" if self.contraction is None else f", contraction={self.contraction:g}"
        return f"n={self.n}, machine={self.machine!r}, backward={self.backward_mode}{c}"
