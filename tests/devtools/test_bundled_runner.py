"""`etkit_runner --bundled_program`: runs every test case of a .bpte natively and reports PASS/FAIL with the
largest difference; bad files end with a message, never a signal. Expected outputs are eager's; tolerance
--atol 1e-5 (rtol 1e-5, the runner's default)."""
from __future__ import annotations

import random
import re
import subprocess

import pytest

from tests.interop import bundled_models

from . import bundling

pytest.importorskip("etkit_xnnpack")


def _run(runner, path, *args):
    return subprocess.run([str(runner), "--model_path", str(path), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", params=bundled_models.MODELS)
def bundles(request, etkit_runner, tmp_path_factory):
    name = request.param
    listed = _run(etkit_runner, "", "--list_backends").stdout.split()
    if name.endswith("xnnpack") and "XnnpackBackend" not in listed:
        pytest.skip(f"{etkit_runner} was built without the XNNPACK delegate (make native links it)")
    directory = tmp_path_factory.mktemp(f"bpte_{name}")
    lowered = bundling.lower(name)
    good, wrong = directory / "good.bpte", directory / "wrong.bpte"
    good.write_bytes(bundling.bpte(name, lowered=lowered))
    wrong.write_bytes(bundling.bpte(name, wrong_case=1, lowered=lowered))
    return etkit_runner, good, wrong


def test_runner_passes_every_case_of_a_good_bpte(bundles):
    runner, good, _ = bundles
    proc = _run(runner, good, "--bundled_program", "--atol", str(bundling.ATOL))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = re.findall(r"forward test case (\d+): PASS \(largest absolute difference (\S+), output \d+\)", proc.stdout)
    assert [int(i) for i, _ in lines] == list(range(bundled_models.NUM_CASES))
    assert all(float(d) <= 1e-5 for _, d in lines)
    assert "2 passed, 0 failed" in proc.stdout


def test_runner_fails_the_wrong_case_with_its_largest_difference(bundles):
    runner, _, wrong = bundles
    proc = _run(runner, wrong, "--bundled_program", "--atol", str(bundling.ATOL))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"forward test case 0: PASS", proc.stdout)
    match = re.search(r"forward test case 1: FAIL \(largest absolute difference (\S+), output 0\)", proc.stdout)
    assert match and abs(float(match.group(1)) - bundling.OFFSET) < 1e-4, proc.stdout
    assert "1 passed, 1 failed" in proc.stdout


def test_runner_runs_the_program_inside_a_bpte(bundles):
    runner, good, _ = bundles
    proc = _run(runner, good, "--iterations", "1")
    assert proc.returncode == 0 and "output 0: shape" in proc.stdout, proc.stderr


def test_runner_refuses_a_pte_for_bundled_program(bundles, tmp_path):
    runner, good, _ = bundles
    from etkit.runtime.bundled import BundledProgramBuffer

    pte = tmp_path / "m.pte"
    pte.write_bytes(BundledProgramBuffer(good).program)
    proc = _run(runner, pte, "--bundled_program")
    assert proc.returncode == 1 and "is not a bundled program (.bpte)" in proc.stderr


def test_runner_survives_truncated_and_bit_flipped_bptes(bundles, tmp_path):
    """60 variants: each run exits 0 or 1 with a message (a signal would give a negative return code)."""
    runner, good, _ = bundles
    data = good.read_bytes()
    rng = random.Random(7)
    variants = [data[:rng.randrange(len(data))] for _ in range(20)]
    for _ in range(40):
        bad = bytearray(data)
        for _ in range(rng.choice((1, 4))):
            i = rng.randrange(len(bad))
            bad[i] ^= 1 << rng.randrange(8)
        variants.append(bytes(bad))
    refused = 0
    for k, variant in enumerate(variants):
        path = tmp_path / f"v{k}.bpte"
        path.write_bytes(variant)
        proc = _run(runner, path, "--bundled_program")
        assert proc.returncode in (0, 1), f"variant {k}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
        if proc.returncode == 1:
            assert "etkit_runner:" in proc.stderr or "FAIL" in proc.stdout, proc.stdout + proc.stderr
        refused += "cannot read bundled program" in proc.stderr
    assert refused >= 20  # every truncation is refused when the file is read
