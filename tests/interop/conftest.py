"""Fixtures for interop tests against the ExecuTorch 1.5.1 oracle (see oracle.py)."""
import pytest

from .oracle import oracle_dir, run_in_oracle


@pytest.fixture(scope="session")
def et_oracle():
    """`run_in_oracle(script_path, *args)`, with the oracle environment made before the first test."""
    oracle_dir()
    return run_in_oracle
