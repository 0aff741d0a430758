"""Build and run etkit's libFuzzer targets (docs/fuzzing.md); what `make fuzz` runs.

    python scripts/fuzz.py [--seconds N | --runs N] [--targets fuzz_program,fuzz_xnnpack,...] [--jobs J]
                           [--replay-only]

For each target: build it with clang, -fsanitize=fuzzer,address,undefined (one CMake tree per source
tree under build/fuzz/), generate its seed corpus from real lowered programs (scripts/fuzz_corpus.py,
once, into build/fuzz/corpus/), replay every input kept under its regressions/ directory, then fuzz for
N seconds (or, with --runs, until N executions: the long run), growing build/fuzz/work/<target>/ (kept between runs, so coverage accumulates).

Prints one row per target: executions, executions per second, coverage (edges and features, as
libFuzzer counts them), corpus size, regression inputs replayed and crashes. A crash, leak, timeout or
out-of-memory input is written to build/fuzz/artifacts/<target>/ and fails the run (exit 1); once its root
cause is fixed, copy the input into the target's regressions/ directory so every later run replays it.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from lib.dev_env import PY, ROOT, VENV, backend_link_args, run, site_packages, xnnpack_prefix  # scripts/lib/dev_env.py

BUILD = ROOT / "build" / "fuzz"
CLANG, CLANGXX = "clang-14", "clang++-14"
FLAGS = ("-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all "
         "-fno-omit-frame-pointer -g")
# libFuzzer's limits per input: a larger allocation or RSS (Target.rss_limit_mb, 2560 MiB unless a target says
# otherwise), or a slower input, is a finding.
TIMEOUT_S = 25
# Leaks are findings; a sanitizer report exits with libFuzzer's crash status.
#: What LeakSanitizer prints when its own machinery (the tracer that stops threads) fails.
LSAN_TOOL_FAILURE = r"Tracer caught signal \d+.*\n.*LeakSanitizer has encountered a fatal error"
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:allocator_may_return_null=0",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
                 "LSAN_OPTIONS": f"suppressions={ROOT / 'fuzz' / 'lsan.supp'}"}
# Edges the seeds must reach: a real payload reader reaches hundreds (each target's row); rejecting every
# input reaches about 4.
MIN_SEED_EDGES = 100
# A target still running this long after its -max_total_time is hung (libFuzzer's -timeout did not fire).
GRACE_S = 180


@dataclass
class Tree:
    """One CMake tree built for fuzzing: a source directory and the options that switch its targets on."""
    source: Path
    args: list = field(default_factory=list)


@dataclass
class Target:
    name: str
    tree: str
    binary: str  # relative to the tree's build directory
    home: Path   # holds <name>.dict and regressions/
    rss_limit_mb: int = 2560
    asan_options: str = ""  # appended to SANITIZER_ENV's ASAN_OPTIONS
    #: edges the seeds must reach (a small parser accepting its seeds shows fewer than a whole loader)
    min_seed_edges: int = MIN_SEED_EDGES


def trees() -> dict[str, Tree]:
    site = site_packages()
    xnnpack = xnnpack_prefix("fuzz.py")
    return {
        "runtime": Tree(ROOT / "runtime-cpp", [
            "-DETKIT_BUILD_FUZZ=ON", f"-DCMAKE_PREFIX_PATH={xnnpack};{site / 'etkit_xnnpack'}",
            *backend_link_args("fuzz.py", "xnnpack", "ETKIT_FUZZ")]),
        "xnnpack": Tree(ROOT / "plugins" / "xnnpack", [
            "-DETKIT_XNNPACK_BUILD_FUZZ=ON", f"-DXNNPACK_ROOT={xnnpack}", f"-DCMAKE_PREFIX_PATH={site / 'etkit'}"]),
        "vulkan": Tree(ROOT / "plugins" / "vulkan", [
            "-DETKIT_VULKAN_BUILD_FUZZ=ON", f"-DCMAKE_PREFIX_PATH={site / 'etkit'}"]),
        "qnn": Tree(ROOT / "plugins" / "qnn", [
            "-DETKIT_QNN_BUILD_FUZZ=ON", f"-DCMAKE_PREFIX_PATH={site / 'etkit'}"]),
        "ethosu": Tree(ROOT / "plugins" / "ethosu", [
            "-DETKIT_ETHOSU_BUILD_FUZZ=ON", f"-DCMAKE_PREFIX_PATH={site / 'etkit'}"]),
        "coreml": Tree(ROOT / "plugins" / "coreml", ["-DETKIT_COREML_BUILD_FUZZ=ON"]),
    }


TARGETS = [
    # fuzz_program's data (dictionary, regressions) names backends, so it lives outside runtime-cpp/.
    Target("fuzz_program", "runtime", "fuzz/fuzz_program", ROOT / "fuzz" / "program"),
    Target("fuzz_bundled_program", "runtime", "fuzz/fuzz_bundled_program", ROOT / "fuzz" / "bundled_program"),
    Target("fuzz_etdump", "runtime", "fuzz/fuzz_etdump", ROOT / "fuzz" / "etdump"),
    Target("fuzz_ptd", "runtime", "fuzz/fuzz_ptd", ROOT / "fuzz" / "ptd"),
    Target("fuzz_xnnpack", "xnnpack", "fuzz_xnnpack", ROOT / "plugins" / "xnnpack" / "runtime" / "fuzz"),
    # lavapipe compiles every pipeline with LLVM, and what that frees pins ASan's quarantine: replaying 1,700 inputs
    # (-runs=0) leaves 2.3-3.5 GiB resident with the default 256 MiB quarantine, 0.8 GiB with 8 MiB, 0.33 GiB
    # with none (live heap: under 0.2 GiB). 8 MiB keeps use-after-free detection for recent frees.
    Target("fuzz_vulkan", "vulkan", "fuzz_vulkan", ROOT / "plugins" / "vulkan" / "runtime" / "fuzz",
           asan_options="quarantine_size_mb=8"),
    Target("fuzz_qnn_payload", "qnn", "fuzz_qnn_payload", ROOT / "plugins" / "qnn" / "runtime" / "fuzz"),
    # (its seeds reach 81 edges; a line of other text, 27)
    Target("fuzz_qnn_profile", "qnn", "fuzz_qnn_profile",
           ROOT / "plugins" / "qnn" / "runtime" / "fuzz" / "profile", min_seed_edges=50),
    Target("fuzz_ethosu", "ethosu", "fuzz_ethosu", ROOT / "plugins" / "ethosu" / "runtime" / "fuzz"),
    # (its seeds reach 31 edges; a blob refused at its magic, 13)
    Target("fuzz_ethosu_estimates", "ethosu", "fuzz_ethosu_estimates",
           ROOT / "plugins" / "ethosu" / "runtime" / "fuzz" / "estimates", min_seed_edges=20),
    Target("fuzz_coreml_payload", "coreml", "fuzz_coreml_payload", ROOT / "plugins" / "coreml" / "runtime" / "fuzz"),
]


def _run(cmd, **kw) -> None:
    run("fuzz.py", cmd, **kw)


def check_toolchain() -> None:
    missing = [c for c in (CLANG, CLANGXX) if shutil.which(c) is None]
    fuzzer_rt = list(Path("/usr/lib").glob("llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a"))
    if missing or not fuzzer_rt:
        sys.exit(f"fuzz.py: needs {CLANGXX} and libFuzzer (Debian: clang-14 libclang-rt-14-dev); "
                 f"run `make system` (scripts/setup_system.sh installs them)")


def build(tree_name: str, tree: Tree, targets: list[str]) -> Path:
    out = BUILD / tree_name
    configured = out / ".configured-with"
    args = [f"-DCMAKE_C_FLAGS={FLAGS}", f"-DCMAKE_CXX_FLAGS={FLAGS}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            f"-DPython_EXECUTABLE={PY}", *tree.args]
    stamp = "\n".join([str(tree.source), *args])  # a tree whose source directory moved is configured afresh
    if not (out / "build.ninja").is_file() or not configured.is_file() or configured.read_text() != stamp:
        if configured.is_file() and configured.read_text().split("\n", 1)[0] != str(tree.source):
            shutil.rmtree(out)  # CMake refuses a build directory configured for another source directory
        env = {**os.environ, "CC": CLANG, "CXX": CLANGXX}
        _run([str(VENV / "bin" / "cmake"), "-S", str(tree.source), "-B", str(out), "-G", "Ninja",
              f"-DCMAKE_MAKE_PROGRAM={VENV / 'bin' / 'ninja'}", *args], env=env, stdout=subprocess.DEVNULL)
        configured.write_text(stamp)
    jobs = os.environ.get("ETKIT_BUILD_JOBS", "2")
    _run(["flock", "/tmp/etkit-build.lock", str(VENV / "bin" / "cmake"), "--build", str(out), "-j", jobs,
          "--target", *targets], stdout=subprocess.DEVNULL)
    return out


def ensure_corpora(names: list[str]) -> None:
    """Seeds are regenerated when scripts/fuzz_corpus.py changes (its hash is stamped beside them)."""
    script = ROOT / "scripts" / "fuzz_corpus.py"
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    stale = [n for n in names if not (BUILD / "corpus" / n / ".stamp").is_file()
             or (BUILD / "corpus" / n / ".stamp").read_text() != digest]
    if stale:
        _run([str(PY), str(script), str(BUILD / "corpus"), "--targets", ",".join(stale)])
        for n in stale:
            (BUILD / "corpus" / n / ".stamp").write_text(digest)


@dataclass
class Result:
    target: str
    seconds: float = 0.0
    executions: int = 0
    exec_per_s: int = 0
    edges: int = 0
    features: int = 0
    corpus: int = 0
    regressions: int = 0
    crashes: list = field(default_factory=list)
    report: str = ""  # the sanitizer's or libFuzzer's account of the first finding (see _report)
    finding: str = ""  # the line that report starts with: what kind of finding it is
    warnings: list = field(default_factory=list)  # failures that were not inputs (see _not_an_input)


def _stat(text: str, key: str) -> int:
    m = re.search(rf"stat::{key}:\s*(\d+)", text)
    return int(m.group(1)) if m else 0


def _artifacts(text: str) -> list[str]:
    return re.findall(r"Test unit written to (\S+)", text)


# How a finding starts in libFuzzer's output: a sanitizer report, a UBSan check, a signal, or libFuzzer's own
# leak / out-of-memory / timeout / malloc-limit notices.
_FINDING = re.compile(r"==\d+==ERROR|runtime error:|==\d+== ERROR: libFuzzer|deadly signal|ALARM: working on|"
                      r"out-of-memory \(|malloc\(\d+\) limit|Direct leak|Indirect leak|"
                      r"Sanitizer CHECK failed|Tracer caught signal|ERROR: Failed to mmap|terminate called")
REPORT_LINES = 40
# A crash input up to this size is printed in base64 with the report, so a CI log alone reproduces it.
PRINTED_INPUT_BYTES = 16 * 1024


def _report(text: str, inputs: list[str]) -> str:
    """The first finding in a libFuzzer log, for the CI log (whose tail is what is kept): each crash input in
    base64 when small, so a finding on a machine whose build/ is gone can still be replayed, then REPORT_LINES
    lines from where the finding starts."""
    out = []
    for name in inputs:
        path = Path(name)
        if path.is_file() and path.stat().st_size <= PRINTED_INPUT_BYTES:
            data = base64.b64encode(path.read_bytes()).decode()
            out.append(f"{path.name} ({path.stat().st_size} bytes), base64 (decode with `base64 -d`):")
            out.extend(data[i:i + 100] for i in range(0, len(data), 100))
    lines = text.splitlines()
    first = _finding_index(lines)
    first = max(0, len(lines) - REPORT_LINES) if first is None else first
    return "\n".join(out + lines[first:first + REPORT_LINES])


def _finding_index(lines: list[str]) -> int | None:
    """Index of the line a finding's report starts with, or None when the log has none."""
    return next((i for i, line in enumerate(lines) if _FINDING.search(line)), None)


def _first_finding_line(text: str) -> str:
    """The line a finding's report starts with (what kind of finding it is), or the log's last line."""
    lines = text.splitlines()
    first = _finding_index(lines)
    return lines[first].strip() if first is not None else (lines[-1].strip() if lines else "")


#: How many times a saved input is replayed alone before it is called unreproducible.
REPLAYS = 3


def _not_an_input(text: str, binary: Path, env: dict, limits: list[str]) -> str | None:
    """Why a failed run's finding is not a reproducible input (None when it is one, the normal case).

    Two known causes, both seen on CI and neither replayable: LeakSanitizer's own thread-stopping tracer dying
    (the 'crash input' it leaves is the empty input), and a failure whose saved input runs clean alone,
    REPLAYS times in a fresh process (the sanitizer runtime itself running out of memory or address space
    under load is one such case). A finding whose input fails again on replay is always reported."""
    if re.search(LSAN_TOOL_FAILURE, text):
        return "LeakSanitizer itself failed (its tracer died; not an input)"
    found = [Path(a) for a in _artifacts(text)]
    if not found or not all(p.is_file() for p in found):
        return None
    for path in found:
        replay = subprocess.run([str(binary), f"-runs={REPLAYS}", *limits, str(path)], env=env,
                                capture_output=True, text=True, errors="replace", timeout=GRACE_S + TIMEOUT_S * REPLAYS)
        if replay.returncode != 0:
            return None
    return f"the input it saved does not fail when replayed alone ({REPLAYS} runs in a fresh process)"


def run_target(target: Target, binary: Path, seconds: int, runs: int, seed: int, replay_only: bool) -> Result:
    result = Result(target.name)
    env = {**os.environ, **SANITIZER_ENV}
    if target.asan_options:
        env["ASAN_OPTIONS"] += ":" + target.asan_options
    regressions = sorted(p for p in (target.home / "regressions").glob("*")
                         if p.is_file() and not p.name.startswith("."))
    result.regressions = len(regressions)
    limits = [f"-rss_limit_mb={target.rss_limit_mb}", f"-timeout={TIMEOUT_S}"]
    if regressions:
        proc = subprocess.run([str(binary), *limits, *map(str, regressions)], env=env, capture_output=True,
                              text=True, errors="replace", timeout=GRACE_S + TIMEOUT_S * len(regressions))
        if proc.returncode != 0:
            log = BUILD / "artifacts" / target.name / "regressions.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(proc.stdout + proc.stderr)
            result.crashes.append(f"a regression input fails again (log: {log})")
            result.report = _report(proc.stdout + proc.stderr, [])
            result.finding = _first_finding_line(proc.stdout + proc.stderr)
            return result
    if replay_only:
        return result
    work = BUILD / "work" / target.name
    artifacts = BUILD / "artifacts" / target.name
    work.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    dictionary = target.home / f"{target.name}.dict"
    cmd = [str(binary), f"-max_total_time={seconds}", *([f"-runs={runs}"] if runs else []),
           *([f"-seed={seed}"] if seed else []), "-print_final_stats=1",
           *limits,
           f"-artifact_prefix={artifacts}/", *([f"-dict={dictionary}"] if dictionary.is_file() else []),
           str(work), str(BUILD / "corpus" / target.name)]
    for attempt in (1, 2):
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace",
                                  timeout=seconds + GRACE_S)
        except subprocess.TimeoutExpired as hung:
            text = (hung.stdout or b"").decode(errors="replace") + (hung.stderr or b"").decode(errors="replace")
            (artifacts / "last_run.log").write_text(text)
            result.report = _report(text, [])
            result.crashes.append(f"hung: still running {GRACE_S} s after -max_total_time, killed "
                                  f"(log: {artifacts / 'last_run.log'})")
            return result
        result.seconds = time.monotonic() - start
        text = proc.stdout + proc.stderr
        (artifacts / "last_run.log").write_text(text)
        if proc.returncode == 0 or attempt == 2:
            break
        why = _not_an_input(text, binary, env, limits)
        if why is None:
            break
        # Not an input: the sanitizer's own machinery failed, or what the run saved does not fail on its own.
        # The log and input are kept for whoever looks (unreproduced-*), and the target runs once more; a second
        # failure of any kind is reported like any crash.
        kept = artifacts / f"unreproduced-{attempt}.log"
        kept.write_text(text)
        for found in map(Path, _artifacts(text)):
            if found.is_file():
                found.rename(found.with_name("unreproduced-" + found.name))
        note = f"{why}; ran it once more (log: {kept}; first line: {_first_finding_line(text)})"
        result.warnings.append(note)
        print(f"fuzz.py: {target.name}: {note}", file=sys.stderr, flush=True)
    result.executions = _stat(text, "number_of_executed_units")
    result.exec_per_s = _stat(text, "average_exec_per_sec")
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    if cov:
        result.edges, result.features, result.corpus = map(int, cov[-1])
    if proc.returncode != 0:
        found = _artifacts(text)
        result.crashes.extend(found or [f"exit {proc.returncode} (log: {artifacts / 'last_run.log'})"])
        result.report = _report(text, found)
        result.finding = _first_finding_line(text)
    # A harness that rejects every seed (a case layout out of step with scripts/fuzz_corpus.py, a target
    # that cannot register its backend) would fuzz nothing and pass: libFuzzer must have kept some seeds.
    # (A target that rejects every input still shows a handful of edges: its own header parsing.)
    inited = re.search(r"INITED cov: (\d+)", text)
    if proc.returncode == 0 and (inited is None or int(inited.group(1)) < target.min_seed_edges):
        result.crashes.append(f"no seed input was accepted: the target fuzzed nothing (log: {artifacts / 'last_run.log'})")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per target (default 60)")
    parser.add_argument("--runs", type=int, default=0,
                        help="stop each target after this many executions instead (the time limit becomes 4 h)")
    parser.add_argument("--targets", default=",".join(t.name for t in TARGETS), help="comma-separated (default: all)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("ETKIT_BUILD_JOBS", "2")),
                        help="targets fuzzed at once (one core each)")
    parser.add_argument("--seed", type=int, default=0,
                        help="libFuzzer's random seed (0: a new one each run). CI passes 1, which makes the mutations "
                             "repeatable but not the run: what a target reaches in its time also depends on the "
                             "machine's speed and load (CI found conv-groups-overflow on fuzz_program after 136,283 "
                             "executions; a seed-1 run here had passed 306,999 without it)")
    parser.add_argument("--replay-only", action="store_true", help="build and replay the regressions only")
    args = parser.parse_args(argv)
    by_name = {t.name: t for t in TARGETS}
    unknown = [n for n in args.targets.split(",") if n not in by_name]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(by_name)}")
    chosen = [by_name[n] for n in args.targets.split(",")]

    check_toolchain()
    all_trees = trees()
    binaries = {}
    for tree_name in dict.fromkeys(t.tree for t in chosen):
        names = [t.name for t in chosen if t.tree == tree_name]
        out = build(tree_name, all_trees[tree_name], names)
        for t in chosen:
            if t.tree == tree_name:
                binaries[t.name] = out / t.binary
    if not args.replay_only:
        ensure_corpora([t.name for t in chosen])

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        seconds = 4 * 3600 if args.runs else args.seconds
        results = list(pool.map(lambda t: run_target(t, binaries[t.name], seconds, args.runs, args.seed,
                                                     args.replay_only), chosen))

    header = f"{'target':<22}{'seconds':>8}{'executions':>12}{'exec/s':>8}{'edges':>7}{'features':>9}" \
             f"{'corpus':>7}{'regressions':>12}{'crashes':>8}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r.target:<22}{r.seconds:>8.0f}{r.executions:>12}{r.exec_per_s:>8}"
              f"{r.edges:>7}{r.features:>9}{r.corpus:>7}{r.regressions:>12}{len(r.crashes):>8}")
    print(f"({time.monotonic() - start:.0f} s with {args.jobs} at a time; logs and crash inputs in "
          f"{BUILD / 'artifacts'})")
    for r in results:
        for w in r.warnings:
            print(f"fuzz.py: warning: {r.target}: {w}")
    failed = [r for r in results if r.crashes]
    for r in failed:
        for c in r.crashes:
            print(f"fuzz.py: {r.target}: {c}", file=sys.stderr)
        if r.report:
            print(f"fuzz.py: {r.target}: what its log says:", file=sys.stderr)
            print("\n".join("    " + line for line in r.report.splitlines()), file=sys.stderr)
    if failed:
        # Last, because a CI log is often read from its tail: what kind of finding each one is.
        for r in failed:
            if r.finding:
                print(f"fuzz.py: {r.target}: the finding starts: {r.finding}", file=sys.stderr)
        print("fuzz.py: reproduce with `<binary> <input>`; fix the root cause, then copy the input into the "
              "target's regressions/ directory (docs/fuzzing.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
