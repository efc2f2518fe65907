"""aocsim.solve: the loop of `aoc run` from NumPy and torch arrays."""
import h5py
import numpy as np
import pytest

import aocsim
from conftest import attr


def example(n=48, batch=5, seed=3):
    return aocsim.random_problem(n, batch, seed)


@pytest.mark.parametrize("flags, kwargs", [
    ([], {}),
    (["--quantize", "--noise", "--seed", "7"], dict(quantize=True, noise=True, seed=7)),
    (["--precision", "f64", "--rule", "relative", "--tol", "1e-6", "--max-iter", "80", "--trace"],
     dict(precision="f64", rule="relative", tol=1e-6, max_iter=80, trace=True)),
    (["--mode", "ideal", "--alpha", "0.3", "--bandwidth", "--hardware-readout", "--noise", "--set", "noise.thermal_sigma=0.005"],
     dict(mode="ideal", alpha=0.3, bandwidth=True, hardware_readout=True, noise=True, set={"noise.thermal_sigma": 0.005})),
    (["--anneal", "linear:0.9:0.5:20", "--hw", "aoc-16"], dict(anneal="linear:0.9:0.5:20", hw="aoc-16")),
    (["--noise", "--zero-reads", "0", "--seed", "5"], dict(noise=True, zero_reads=0, seed=5)),
])
def test_solve_gives_the_digests_of_aoc_run(cli, tmp_path, flags, kwargs):
    n = 16 if "aoc-16" in flags else 48
    inp, out = tmp_path / "in.h5", tmp_path / "out.h5"
    cli("run", "--example-input", inp, "--n", n, "--batch", 6, "--seed", 11)
    cli("run", inp, "-o", out, *flags)
    p = aocsim.read_run_input(inp)
    r = aocsim.solve(p.W, p.x, p.bias, p.z0, **kwargs)
    with h5py.File(out) as f:
        assert r.output_digest == attr(f, "output_digest")
        assert r.config_hash == attr(f, "config_hash")
        assert np.array_equal(r.z, f["fixed_points"][...])
        assert np.array_equal(r.readout, f["readout"][...])
        assert np.array_equal(r.iterations, f["iterations"][...])
        if "--trace" in flags:
            assert r.state_trace.shape == f["state_trace"].shape


def test_random_problem_is_the_example_input_of_aoc_run(cli, tmp_path):
    cli("run", "--example-input", tmp_path / "in.h5", "--n", 16, "--batch", 3, "--seed", 5)
    p, q = aocsim.read_run_input(tmp_path / "in.h5"), aocsim.random_problem(16, 3, 5)
    for k in ("W", "x", "bias", "z0"):
        assert np.array_equal(p[k], q[k])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_contiguous_float_inputs_are_read_in_place(dtype):
    p = example()
    r = aocsim.solve(*(p[k].astype(dtype) for k in ("W", "x", "bias", "z0")))
    assert r.borrowed


def test_other_layouts_are_converted_and_give_the_same_result():
    p = example()
    direct = aocsim.solve(p.W, p.x, p.bias)
    x_strided = np.asfortranarray(p.x)
    converted = aocsim.solve(p.W, x_strided, p.bias)
    assert not converted.borrowed
    assert converted.output_digest == direct.output_digest


def test_float32_inputs_give_the_float64_inputs_result_when_the_values_are_the_same():
    p = example()
    W, x, b = (p[k].astype(np.float32) for k in ("W", "x", "bias"))
    assert aocsim.solve(W, x, b).output_digest == aocsim.solve(W.astype(np.float64), x.astype(np.float64), b.astype(np.float64)).output_digest


def test_torch_tensors_are_read_without_a_copy():
    torch = pytest.importorskip("torch")
    p = example()
    W, x, b = (torch.from_numpy(p[k]) for k in ("W", "x", "bias"))
    r = aocsim.solve(W, x, b)
    assert r.borrowed and r.output_digest == aocsim.solve(p.W, p.x, p.bias).output_digest


def test_results_do_not_depend_on_the_thread_count():
    p = example(batch=16)
    one = aocsim.solve(p.W, p.x, p.bias, noise=True, quantize=True, threads=1)
    three = aocsim.solve(p.W, p.x, p.bias, noise=True, quantize=True, threads=3)
    assert one.output_digest == three.output_digest


def test_a_batch_split_by_first_sample_gives_the_whole_runs_rows():
    p = example(batch=8)
    kw = dict(noise=True, rule="relative", tol=1e-6, max_iter=100)
    whole = aocsim.solve(p.W, p.x, p.bias, **kw)
    tail = aocsim.solve(p.W, p.x[5:], p.bias, first_sample=5, **kw)
    assert np.array_equal(whole.z[5:], tail.z)


def test_one_sample_may_be_given_as_a_vector():
    p = example(batch=1)
    r = aocsim.solve(p.W, p.x[0], p.bias)
    assert r.z.shape == (48,) and np.array_equal(r.z, aocsim.solve(p.W, p.x, p.bias).z[0])


@pytest.mark.parametrize("change, message", [
    (dict(W=np.zeros((48, 47))), "W: expected shape"),
    (dict(x=np.zeros((4, 40))), "x: expected shape"),
    (dict(bias=np.zeros(3)), "bias: expected shape"),
    (dict(x=np.full((2, 48), np.nan)), "x: contains NaN"),
    (dict(W=np.array([["a"]])), "W: not an array of numbers"),
    (dict(bias="x"), "bias: not an array of numbers"),
    (dict(mode="bogus"), "mode: expected one of default, all-off, ideal"),
    (dict(hw="no-such-machine"), "no such hardware file"),
    (dict(set={"noise.thermal_sigma": -1}), "noise.thermal_sigma"),
    (dict(tol=0), "tol: must be a positive"),
    (dict(anneal="cosine:1:0:3"), "anneal: expected"),
])
def test_bad_input_raises_one_line_naming_the_field(change, message):
    p = example(batch=2)
    args = dict(W=p.W, x=p.x, bias=p.bias)
    args.update(change)
    W, x, bias = args.pop("W"), args.pop("x"), args.pop("bias")
    with pytest.raises(aocsim.Error, match=message) as e:
        aocsim.solve(W, x, bias, **args)
    assert "\n" not in str(e.value)
