"""Graphs and programs from Python: import, compile, run on each backend, check, estimate; the same
results as the CLI's."""
import os

import h5py
import numpy as np
import pytest

import aocsim

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "data", "implicit-lm", "mamba2-state-tracking-implicit", "config.json")


@pytest.fixture(scope="module")
def cli_program(cli, tmp_path_factory):
    """The state-tracking model imported and compiled by the CLI, with seeded tokens and a cpu run."""
    d = tmp_path_factory.mktemp("prog")
    cli("import", CONFIG, "-o", d / "m.json")
    cli("compile", d / "m.json", "--hw", "aoc-48", "-o", d / "m.aocp.h5")
    cli("run", d / "m.aocp.h5", "--example-input", d / "tok.h5", "--batch", 2, "--length", 6)
    cli("run", d / "m.aocp.h5", "--inputs", d / "tok.h5", "--backend", "cpu", "-o", d / "cpu.h5")
    cli("run", d / "m.aocp.h5", "--inputs", d / "tok.h5", "--quantize", "--noise", "--seed", 4, "-o", d / "sim.h5")
    with h5py.File(d / "tok.h5") as f:
        tokens = {k: f[k][...] for k in f}
    return d, tokens


def outputs_of(path, names):
    with h5py.File(path) as f:
        return {n: f[n][...] for n in names}


def test_a_program_runs_as_aoc_run_on_the_cpu_and_sim_backends(cli_program):
    d, tokens = cli_program
    p = aocsim.load_program(d / "m.aocp.h5")
    cpu, sim = p.run(tokens, backend="cpu"), p.run(tokens, backend="sim", quantize=True, noise=True, seed=4)
    for name, v in outputs_of(d / "cpu.h5", p.outputs).items():
        assert np.array_equal(cpu.outputs[name], v.reshape(cpu.outputs[name].shape))
    for name, v in outputs_of(d / "sim.h5", p.outputs).items():
        assert np.array_equal(sim.outputs[name], v.reshape(sim.outputs[name].shape))
    assert sim.counters["dac"] > 0 and cpu.fixed_points[0].iterations.shape == (2,)


def test_import_and_compile_in_python_give_the_cli_program(cli_program):
    d, tokens = cli_program
    mine = aocsim.import_config(CONFIG).compile("aoc-48")
    theirs = aocsim.load_program(d / "m.aocp.h5")
    assert str(mine) == str(theirs)
    a, b = mine.run(tokens, backend="cpu"), theirs.run(tokens, backend="cpu")
    assert all(np.array_equal(a.outputs[n], b.outputs[n]) for n in mine.outputs)


def test_example_inputs_are_those_of_aoc_run(cli_program):
    d, tokens = cli_program
    mine = aocsim.load_program(d / "m.aocp.h5").example_inputs(batch=2, length=6, seed=1)
    assert set(mine) == set(tokens) and all(np.array_equal(mine[k], tokens[k]) for k in tokens)


def test_a_saved_program_loads_back_the_same(cli_program, tmp_path):
    d, _ = cli_program
    p = aocsim.load_program(d / "m.aocp.h5")
    p.save(str(tmp_path / "again.aocp.h5"))
    assert str(aocsim.load_program(tmp_path / "again.aocp.h5")) == str(p)


def test_check_reports_an_exact_match_with_the_ideal_simulator_and_an_error_with_noise(cli_program):
    d, tokens = cli_program
    p = aocsim.load_program(d / "m.aocp.h5")
    exact = p.check(tokens, quantize=False, noise=False, ideal_optics=True, precision="f64")
    noisy = p.check(tokens, seeds=2, quantize=True, noise=True)
    assert exact.max_abs["max"] < 1e-9
    assert noisy.max_abs["max"] > exact.max_abs["max"] and noisy.seeds == 2


def test_floor_patience_reaches_the_backend(cli_program):
    # its effect on a model whose solves reach their floor: the CLI test "cli: --floor-patience ..."
    d, tokens = cli_program
    p = aocsim.load_program(d / "m.aocp.h5")
    with pytest.raises(Exception, match="floor_patience"):
        p.run(tokens, backend="sim", noise=True, floor_patience=-1)
    with pytest.raises(Exception, match="floor_patience"):
        p.check(tokens, floor_patience=-1)
    a, b = p.run(tokens, noise=True, seed=4), p.run(tokens, noise=True, seed=4, floor_patience=8)
    assert all(np.array_equal(a.outputs[n], b.outputs[n]) for n in p.outputs)


def test_estimate_gives_energy_and_latency_with_their_sources(cli_program, cli):
    d, _ = cli_program
    e = aocsim.load_program(d / "m.aocp.h5").estimate(iterations=10, seq_len=64)
    assert e.energy_per_token_j["typ"] > 0 and e.latency_per_token_s > 0
    assert all(line["source"] for line in e.energy) and all(line["source"] for line in e.latency)
    import json
    cli("estimate", d / "m.aocp.h5", "--iterations", 10, "--seq-len", 64, "--json", "-o", d / "e.json")
    theirs = json.load(open(d / "e.json"))
    assert theirs["energy_per_token_j"] == e.energy_per_token_j


def test_graph_weights_can_be_read_and_replaced():
    g = aocsim.import_config(CONFIG)
    name = g.weight_names[0]
    w = g.weight(name)
    g.set_weight(name, np.zeros_like(w))
    assert not g.weight(name).any()
    with pytest.raises(aocsim.Error, match="expected shape"):
        g.set_weight(name, np.zeros(w.size + 1))


def test_inputs_with_nan_are_refused_naming_the_input(cli_program):
    d, tokens = cli_program
    bad = {k: v.astype(float) for k, v in tokens.items()}
    next(iter(bad.values()))[0, 0] = np.nan
    with pytest.raises(aocsim.Error, match="inputs\\['.*'\\]: contains NaN"):
        aocsim.load_program(d / "m.aocp.h5").run(bad, backend="cpu")


def test_an_unknown_backend_is_an_error_listing_them(cli_program):
    d, tokens = cli_program
    with pytest.raises(aocsim.Error, match="sim"):
        aocsim.load_program(d / "m.aocp.h5").run(tokens, backend="tpu")


def test_sequential_runs_give_iterations_per_sample_and_token_shaped_b_by_l(cli_program, cli):
    d, tokens = cli_program
    cli("run", d / "m.aocp.h5", "--inputs", d / "tok.h5", "--backend", "cpu", "--sequence", "sequential", "-o", d / "seq.h5")
    r = aocsim.load_program(d / "m.aocp.h5").run(tokens, backend="cpu", sequence="sequential")
    fp = r.fixed_points[0]
    assert fp.iterations.shape == (2, 6) and fp.converged.shape == (2, 6)
    with h5py.File(d / "seq.h5") as f:
        assert f[fp.op + ".iterations"].shape == (2, 6) and f[fp.op + ".converged"].shape == (2, 6)
        assert np.array_equal(f[fp.op + ".iterations"][...], fp.iterations)


def test_a_trained_model_folder_task_calibration_and_labels_as_the_cli(cli, tmp_path):
    """aocsim.task, import_config with an aoc weights file, compile(calibrate=array) and
    check(labels=...) give what aoc task, aoc import, aoc compile --calibrate and aoc check --labels give."""
    import json
    model = os.path.join(HERE, "..", "..", "models", "trained", "parity-implicit")
    config, weights = os.path.join(model, "config.json"), os.path.join(model, "weights.h5")
    cli("task", "parity", "--batch", 8, "--length", 16, "--seed", 4242, "--tokens", tmp_path / "tok.h5", "--labels", tmp_path / "lab.h5")
    cli("task", "parity", "--batch", 4, "--length", 16, "--seed", 4242, "--split", "calibration", "--tokens", tmp_path / "cal.h5",
        "--labels", tmp_path / "cal-lab.h5")
    test, cal = aocsim.task("parity", 8, 16, seed=4242), aocsim.task("parity", 4, 16, seed=4242, split="calibration")
    with h5py.File(tmp_path / "tok.h5") as f, h5py.File(tmp_path / "lab.h5") as g:
        assert np.array_equal(test.tokens, f["tokens"][...]) and np.array_equal(test.labels, g["labels"][...])
    cli("import", config, "--shapes-only", "-o", tmp_path / "g.json")
    cli("compile", tmp_path / "g.json", "--weights", weights, "--calibrate", tmp_path / "cal.h5", "-o", tmp_path / "p.h5")
    theirs = json.loads(cli("check", tmp_path / "p.h5", "--inputs", tmp_path / "tok.h5", "--labels", tmp_path / "lab.h5", "--quantize",
                            "--no-noise", "--sequence", "simultaneous", "--json"))
    p = aocsim.import_config(config, weights=weights).compile("aoc-48", calibrate=cal.tokens)
    assert str(p) == str(aocsim.load_program(tmp_path / "p.h5"))
    mine = p.check({"tokens": test.tokens}, labels=test.labels, noise=False, sequence="simultaneous")
    assert mine.accuracy_last["mean"] == theirs["accuracy_last"]["mean"]
    assert mine.accuracy["mean"] == theirs["accuracy"]["mean"]
    assert mine.reference_accuracy_last == theirs["reference_accuracy_last"]
    with pytest.raises(aocsim.Error, match="labels"):
        p.check({"tokens": test.tokens}, labels=test.labels[:, :3], noise=False)
    # trim_range is aoc compile's --trim-range: the same program, trims or none
    cli("compile", tmp_path / "g.json", "--weights", weights, "--calibrate", tmp_path / "cal.h5", "--trim-range", 1, "-o", tmp_path / "flat.h5")
    flat = aocsim.import_config(config, weights=weights).compile("aoc-48", calibrate=cal.tokens, trim_range=1)
    assert str(flat) == str(aocsim.load_program(tmp_path / "flat.h5"))
    import re
    trimmed = lambda prog: [int(n) for n in re.findall(r"(\d+) detector gains trimmed", str(prog))]
    assert trimmed(flat) and all(n == 0 for n in trimmed(flat)) and sum(trimmed(p)) > 0
    with pytest.raises(aocsim.Error, match="trim_range"):
        aocsim.import_config(config, weights=weights).compile("aoc-48", trim_range=0.5)
    # balance is aoc compile's --balance: the same program
    cli("compile", tmp_path / "g.json", "--weights", weights, "--calibrate", tmp_path / "cal.h5", "--balance", 0.75, "-o", tmp_path / "bal.h5")
    bal = aocsim.import_config(config, weights=weights).compile("aoc-48", calibrate=cal.tokens, balance=0.75)
    assert str(bal) == str(aocsim.load_program(tmp_path / "bal.h5")) and str(bal) != str(p)
    with pytest.raises(aocsim.Error, match="balance needs calibrate"):
        aocsim.import_config(config, weights=weights).compile("aoc-48", balance=0.5)


def test_import_tol_is_aoc_import_tol(cli, tmp_path):
    """import_config(tol=) writes the graph aoc import --tol writes; a model without a fixed point and
    a tol that is not a number > 0 are refused."""
    model = os.path.join(HERE, "..", "..", "models", "trained", "s5-implicit-aoc48-1800")
    cli("import", os.path.join(model, "config.json"), "--tol", 0.02, "-o", tmp_path / "g.json")
    cli("compile", tmp_path / "g.json", "-o", tmp_path / "p.h5")
    mine = aocsim.import_config(os.path.join(model, "config.json"), weights=os.path.join(model, "weights.h5"), tol=0.02).compile("aoc-48")
    assert str(mine) == str(aocsim.load_program(tmp_path / "p.h5"))
    assert "tol = 0.02" in str(mine) and "tol = 0.05" not in str(mine)
    with pytest.raises(aocsim.Error, match="no fixed point"):
        aocsim.import_config(os.path.join(HERE, "..", "..", "models", "trained", "s5-explicit", "config.json"), shapes_only=True, tol=0.02)
    for bad in (0, -1, float("nan")):
        with pytest.raises(aocsim.Error, match="tol"):
            aocsim.import_config(os.path.join(model, "config.json"), shapes_only=True, tol=bad)
