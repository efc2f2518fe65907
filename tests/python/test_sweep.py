"""aocsim.sweep and aocsim.read_results: a sweep's rows as a pandas DataFrame."""
import os

import numpy as np
import pytest

import aocsim

pd = pytest.importorskip("pandas")
HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO = os.path.join(HERE, "..", "data", "sweeps", "report-parity.json")


@pytest.fixture(scope="module")
def cli_results(cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "results.h5"
    cli("sweep", SCENARIO, "-o", out, "--threads", 1, "--quiet")
    return out


def test_read_results_gives_one_row_per_point_with_parameters_and_metrics(cli_results):
    df = aocsim.read_results(cli_results)
    assert len(df) == 9 and list(df.index) == list(range(9))
    assert {"converters.slm_bits", "noise_scale", "accuracy", "status", "seed"} <= set(df.columns)
    assert df["accuracy"].dtype == np.float64
    assert df["converters.slm_bits"].dtype == np.int64 and df["seed"].dtype == np.int64  # the scenario's integers stay integers
    assert df.attrs["config_hash"] and df.attrs["units"]["accuracy"][0] is not None
    assert (df[df["converters.slm_bits"] == 0]["status"] == "error").all()


def test_a_sweep_run_from_python_gives_the_cli_results(cli_results):
    mine, theirs = aocsim.sweep(SCENARIO, threads=1), aocsim.read_results(cli_results)
    metrics = [c for c in theirs.columns if c not in ("status", "error")]
    pd.testing.assert_frame_equal(mine[metrics], theirs[metrics])


def test_an_unknown_scenario_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(aocsim.Error, match="nope.json"):
        aocsim.sweep(tmp_path / "nope.json")
