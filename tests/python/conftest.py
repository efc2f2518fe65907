"""Shared fixtures of the Python package's tests: the aoc CLI of this build (AOC_CLI) and runs of it."""
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def cli():
    """Runs this build's aoc with the arguments given; returns its stdout (a failure fails the test)."""
    exe = os.environ.get("AOC_CLI")
    if not exe:
        pytest.skip("AOC_CLI is not set (ctest sets it to this build's aoc)")

    def run(*args):
        done = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, f"aoc {' '.join(map(str, args))}: {done.stderr}"
        return done.stdout

    return run


def attr(f, name):
    """An HDF5 attribute as Python text or number (h5py gives bytes for some strings)."""
    v = f.attrs[name]
    return v.decode() if isinstance(v, bytes) else v
