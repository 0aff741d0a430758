"""scripts/fuzz.py's verdict on a failed libFuzzer run (docs/fuzzing.md), driven with a stand-in fuzzer: a finding
whose saved input fails again when replayed is reported; a failure that is not an input (LeakSanitizer's tracer
dying, or a saved input that runs clean alone) is kept as a warning and the target runs once more."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for a libFuzzer binary. Fuzzing runs follow the script in plan.json ("crash", "lsan" or "clean", one
# per run); a replay (`-runs=N <input>`) exits with plan.json's "replay" status. Every call is logged to calls.
FAKE_FUZZER = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    here = Path(__file__).parent
    plan = json.loads((here / "plan.json").read_text())
    calls = here / "calls"
    calls.write_text((calls.read_text() if calls.exists() else "") + " ".join(sys.argv[1:]) + "\\n")
    if not any(a.startswith("-max_total_time") for a in sys.argv[1:]):
        sys.exit(plan["replay"])
    runs = sum(1 for line in calls.read_text().splitlines() if "-max_total_time" in line)
    step = plan["runs"][runs - 1]
    prefix = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("-artifact_prefix="))
    if step == "clean":
        print("INITED cov: 500 ft: 900 corp: 7/1790b", file=sys.stderr)
        print("stat::number_of_executed_units: 1234", file=sys.stderr)
        sys.exit(0)
    if step == "lsan":
        print("Tracer caught signal 11: addr=0x0 pc=0x0 sp=0x0", file=sys.stderr)
        print("==7==LeakSanitizer has encountered a fatal error.", file=sys.stderr)
        name = "crash-da39a3ee5e6b4b0d3255bfef95601890afd80709"
        Path(prefix + name).write_bytes(b"")
    else:
        print("==7==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1", file=sys.stderr)
        print("    #0 0x1 in payload_reader", file=sys.stderr)
        name = "crash-1b64adc45f5ba5b86ab8bcff87e9237b87ac0d03"
        Path(prefix + name).write_bytes(b"\\x02\\x06")
    print("MS: 1 ChangeBinInt-; base unit: 0", file=sys.stderr)
    print(f"artifact_prefix='{prefix}'; Test unit written to {prefix}{name}", file=sys.stderr)
    sys.exit(1)
""")


@pytest.fixture
def fuzz(monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location("etkit_fuzz_script", ROOT / "scripts" / "fuzz.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)    # its dataclasses look themselves up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    monkeypatch.setattr(module, "BUILD", tmp_path / "build")
    return module


def _fake(tmp_path: Path, runs: list[str], replay: int) -> Path:
    binary = tmp_path / "fake_fuzzer"
    binary.write_text(f"#!{sys.executable}\n" + FAKE_FUZZER)
    binary.chmod(0o755)
    (tmp_path / "plan.json").write_text(json.dumps({"runs": runs, "replay": replay}))
    return binary


def _run(fuzz, tmp_path, runs, replay):
    home = tmp_path / "home"
    (home / "regressions").mkdir(parents=True)
    target = fuzz.Target("fuzz_fake", "fake", "fake_fuzzer", home)
    result = fuzz.run_target(target, _fake(tmp_path, runs, replay), seconds=1, runs=0, seed=1, replay_only=False)
    calls = (tmp_path / "calls").read_text().splitlines()
    return result, [c for c in calls if "-max_total_time" in c], [c for c in calls if "-max_total_time" not in c]


def test_a_finding_that_fails_again_on_replay_is_reported_at_once(fuzz, tmp_path):
    result, fuzz_runs, replays = _run(fuzz, tmp_path, ["crash", "clean"], replay=1)
    assert len(fuzz_runs) == 1 and len(replays) == 1
    assert result.crashes and result.crashes[0].endswith("crash-1b64adc45f5ba5b86ab8bcff87e9237b87ac0d03")
    assert result.finding == "==7==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1"
    assert not result.warnings


def test_a_saved_input_that_runs_clean_alone_is_a_warning_and_the_target_runs_again(fuzz, tmp_path):
    result, fuzz_runs, replays = _run(fuzz, tmp_path, ["crash", "clean"], replay=0)
    assert len(fuzz_runs) == 2 and len(replays) == 1
    assert f"-runs={fuzz.REPLAYS}" in replays[0]
    assert result.crashes == []
    assert len(result.warnings) == 1
    assert "does not fail when replayed alone" in result.warnings[0]
    assert "heap-buffer-overflow" in result.warnings[0]       # the kind of failure, for whoever reads the log
    artifacts = tmp_path / "build" / "artifacts" / "fuzz_fake"
    assert (artifacts / "unreproduced-crash-1b64adc45f5ba5b86ab8bcff87e9237b87ac0d03").is_file()
    assert (artifacts / "unreproduced-1.log").is_file()
    assert result.executions == 1234


def test_a_second_failure_is_reported_even_when_neither_reproduces(fuzz, tmp_path):
    result, fuzz_runs, _ = _run(fuzz, tmp_path, ["crash", "crash"], replay=0)
    assert len(fuzz_runs) == 2
    assert len(result.crashes) == 1 and len(result.warnings) == 1


def test_leak_sanitizer_dying_is_not_an_input(fuzz, tmp_path):
    result, fuzz_runs, replays = _run(fuzz, tmp_path, ["lsan", "clean"], replay=1)
    assert len(fuzz_runs) == 2 and replays == []             # recognised from the log, nothing to replay
    assert result.crashes == []
    assert "LeakSanitizer itself failed" in result.warnings[0]
