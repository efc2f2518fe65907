"""aocsim.optimize: the optimiser of `aoc optimize` on a problem file or on NumPy arrays."""
import json
import os

import numpy as np
import pytest

import aocsim

HERE = os.path.dirname(os.path.abspath(__file__))
GSET = os.path.join(HERE, "..", "data", "optimize", "maxcut20.txt")


def test_optimize_of_a_file_gives_the_cli_summary_bit_for_bit(cli):
    flags = dict(samples=40, search_configs=4, sa_samples=20)
    r = aocsim.optimize(GSET, quantize=True, noise=True, best_known=39, **flags)
    out = json.loads(cli("optimize", GSET, "--quantize", "--noise", "--best-known", 39, "--samples", 40, "--search-configs", 4,
                         "--sa-samples", 20, "--json"))
    assert r["aoc"]["success"] == out["aoc"]["success"]
    assert r["params"] == out["params"]
    assert r["aoc"]["best_objective"] == out["aoc"]["best_objective"] == 39
    assert r["objectives"].shape == (40,) and r["objectives"].max() == 39
    assert [b["name"] for b in r["baselines"]] == ["simulated annealing", "simulated bifurcation"]


def test_optimize_of_arrays_finds_a_triangle_s_max_cut():
    A = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]], dtype=np.float64)
    r = aocsim.optimize(-A, mode="ideal", samples=20, search_configs=4, sa_sweeps=0, sb_steps=0)
    s = r["best_state"]
    assert set(np.unique(s)) <= {-1.0, 1.0}
    cut = sum(A[i, j] for i in range(3) for j in range(i + 1, 3) if s[i] != s[j])
    assert cut == 2  # the best a triangle allows
    assert r["aoc"]["best_objective"] == -1.0  # H = -(1/2) s'Js at that cut


def test_optimize_of_a_bad_problem_raises_one_line():
    with pytest.raises(aocsim.Error, match="J must be a square matrix"):
        aocsim.optimize(np.ones((2, 3)))
    with pytest.raises(aocsim.Error, match="not symmetric"):
        aocsim.optimize(np.array([[0.0, 1.0], [2.0, 0.0]]))
