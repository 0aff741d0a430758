"""etkit_runner --progress_every (what bench/soak.py reads over a long run): one line per interval with the
executions so far and the rate, a last line for the tail, and a latency ring that keeps a long run's memory
flat (the median is over the last 4096 iterations)."""
from __future__ import annotations

import re
import subprocess

from .programs import add_program


def _run(etkit_runner, tmp_path, *args):
    path = tmp_path / "add.pte"
    path.write_bytes(add_program())
    return subprocess.run([str(etkit_runner), "--model_path", str(path), *args], capture_output=True, text=True,
                          timeout=120)


def test_runner_reports_progress_and_the_median_of_the_last_iterations(etkit_runner, tmp_path):
    proc = _run(etkit_runner, tmp_path, "--iterations", "20000", "--progress_every", "0.0005")
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^progress: (\d+) executions, ([0-9.]+) executions/s over the last ([0-9.]+) s$",
                       proc.stdout, re.M)
    counts = [int(n) for n, _, _ in lines]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] == 20001, proc.stdout[-2000:]
    assert all(float(rate) > 0 for _, rate, _ in lines)
    assert "median latency:" in proc.stdout and "over the last 4096 of 20000 iterations" in proc.stdout


def test_runner_without_progress_prints_no_progress_lines(etkit_runner, tmp_path):
    proc = _run(etkit_runner, tmp_path, "--iterations", "10")
    assert proc.returncode == 0 and "progress:" not in proc.stdout
    assert "median latency:" in proc.stdout and "over 10 iterations" in proc.stdout


def test_runner_refuses_a_progress_interval_that_is_not_positive(etkit_runner, tmp_path):
    proc = _run(etkit_runner, tmp_path, "--progress_every", "0")
    assert proc.returncode == 2 and "--progress_every takes a number of seconds > 0" in proc.stderr
