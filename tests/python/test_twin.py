"""aocsim.twin: the twin's AOC cells on this simulator, against the twin's golden outputs."""
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

import aocsim
from aocsim import twin

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "dt_golden.json")
CASES = [c for c in json.load(open(GOLDEN))["cases"] if "n_iter" in c]


def cell_of(case):
    """A stand-in with the attributes of the twin's AOCCell, holding a golden case's parameters."""
    flags = case["flags"]
    cell = SimpleNamespace(matrix=np.array(case["W_aoc"]), bias=np.array(case["bias"]), alpha=np.array(case["alpha"]),
                           beta=case.get("beta"), gamma=case.get("gamma"), scale=np.array([case["scale"]]),
                           is_16vars=case["hw_n_variables"] == 16, _normalise_matrix=flags["normalise_matrix"])
    for s in twin.SWITCHES:
        setattr(cell, "_apply_" + s, flags["apply_" + s])
    return cell


@pytest.mark.parametrize("case", [c for c in CASES if not c["flags"]["apply_pbs_crosstalk"]], ids=lambda c: c["name"])
def test_a_cell_runs_the_twins_loop(case):
    r = twin.solve_cell(cell_of(case), np.array(case["x"]), np.array(case["z0"]), rule="fixed", max_iter=case["n_iter"],
                        precision="f64")
    assert np.abs(r.z - np.array(case["after_n_iter"])).max() < 1e-6


def test_switches_aoc_does_not_run_are_an_error_naming_them():
    case = next(c for c in CASES if c["flags"]["apply_pbs_crosstalk"])
    with pytest.raises(aocsim.Error, match="pbs_crosstalk=True"):
        twin.solve_cell(cell_of(case), np.array(case["x"]))


def test_a_cell_becomes_an_aoc_layer_with_the_same_loop():
    torch = pytest.importorskip("torch")
    from aocsim.torch import Machine
    case = next(c for c in CASES if c["name"].startswith("48var_default"))
    cell = cell_of(case)
    layer = twin.layer_from_cell(cell, Machine("aoc-48", precision="f64", rule="relative", tol=1e-12, max_iter=500))
    x = np.array(case["x"])
    direct = twin.solve_cell(cell, x, precision="f64", rule="relative", tol=1e-12, max_iter=500)
    assert np.abs(layer(torch.from_numpy(x)).detach().numpy() - direct.readout).max() < 1e-9
