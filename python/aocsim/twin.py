"""aocsim.twin: a model built with Microsoft's digital twin (microsoft/aoc) on this simulator.

The twin's ``AOCCell`` holds the loop's parameters: ``matrix`` (N x N, AOC convention, out = z @ W),
``bias``, ``alpha`` (None: no leak), ``beta`` (None: the trainable ``scale`` is the gain), ``gamma``,
its non-ideality switches (``_apply_*``, ``_normalise_matrix``) and ``is_16vars`` (which machine).
These functions read them (any object with those attributes will do) and run the same loop on the
simulated aoc-16 or aoc-48, with this simulator's noise, converters and stop rules on top.
The switches must be the machine's defaults (the twin's ``from_parameters``) or all off: those are
the modes aoc runs (``default``, ``all-off``); any other combination is an error naming it.
"""

import numpy as np

import aocsim

__all__ = ["cell_problem", "layer_from_cell", "solve_cell"]

SWITCHES = ("weight_distortion", "input_efficiencies", "output_efficiencies", "pd_crosstalk", "pbs_crosstalk", "slm_darkness")


def _numpy(v):
    if v is None:
        return None
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v, dtype=np.float64)


def cell_problem(cell):
    """The cell's loop for aocsim.solve: a dict of W, bias, and the keywords hw, mode, alpha, beta, gamma."""
    hw = "aoc-16" if getattr(cell, "is_16vars", False) else "aoc-48"
    defaults = aocsim.Hardware(hw).section("defaults")
    flags = {s: bool(getattr(cell, "_apply_" + s)) for s in SWITCHES}
    normalise = bool(getattr(cell, "_normalise_matrix"))
    if normalise != bool(defaults["normalise_matrix"]):
        raise aocsim.Error(f"twin cell: normalise_matrix={normalise}: aoc runs the machine's gain mode "
                        f"(normalise_matrix={defaults['normalise_matrix']}, the twin's from_parameters)")
    if flags == {s: bool(v) for s, v in defaults["switches"].items()}:
        mode = "default"
    elif not any(flags.values()):
        mode = "all-off"
    else:
        raise aocsim.Error("twin cell: switches " + ", ".join(f"{k}={v}" for k, v in flags.items())
                        + ": aoc runs the machine's defaults (mode default) or all off (mode all-off)")
    W = _numpy(cell.matrix)
    n = W.shape[0]
    bias = _numpy(cell.bias)
    alpha = _numpy(cell.alpha)
    beta = _numpy(cell.beta) if getattr(cell, "beta", None) is not None else _numpy(cell.scale)
    gamma = getattr(cell, "gamma", None)
    return dict(W=W, bias=np.zeros(n) if bias is None else bias.reshape(n), hw=hw, mode=mode,
                alpha=np.zeros(n) if alpha is None else np.broadcast_to(alpha.reshape(-1), (n,)).copy(),
                beta=beta.reshape(-1), gamma=None if gamma is None else float(np.asarray(_numpy(gamma)).reshape(-1)[0]))


def solve_cell(cell, x, z0=None, **solve_kwargs):
    """The cell's fixed points on inputs x (B, N) on the simulated machine: aocsim.solve with the cell's
    parameters; solve_kwargs add the rest (noise, quantize, rule, max_iter, precision, seed...)."""
    p = cell_problem(cell)
    W, bias = p.pop("W"), p.pop("bias")
    p.update(solve_kwargs)
    return aocsim.solve(W, _numpy(x), bias, None if z0 is None else _numpy(z0), **p)


def layer_from_cell(cell, machine=None):
    """An aocsim.torch.AOCLayer with the cell's parameters, for training or running the cell's loop in a
    PyTorch model on a Machine (default: the cell's machine, mode default or all-off, noiseless).
    The twin's gain (scale or beta) / N on weights normalised by max|W| becomes the layer's beta."""
    import torch
    from aocsim.torch import AOCLayer, Machine
    p = cell_problem(cell)
    n = p["W"].shape[0]
    if machine is None:
        machine = Machine(p["hw"], mode=p["mode"])
    layer = AOCLayer(n, machine, dtype=torch.float64)
    gain = float(p["beta"].mean())
    if not np.all(p["beta"] == gain):
        raise aocsim.Error("twin cell: beta per channel: an AOCLayer holds one gain")
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(p["W"]))
        layer.bias.copy_(torch.from_numpy(p["bias"]))
        layer.alpha.copy_(torch.from_numpy(p["alpha"]))
        layer.beta.fill_(gain / (n * np.abs(p["W"]).max()))
    return layer
