"""Print the Core ATen op coverage table of etkit's portable kernels, without pytest.

    .venv/bin/python bench/op_coverage.py [--dtypes float32,int8] [--ops add,conv] [--json out.json] [-v]

Runs the cases of ``tests/ops`` (every applicable dtype unless ``--dtypes``; ``--ops`` keeps the ops
whose name contains one of the strings), prints one line per case with ``-v``, then the table
``pytest tests/ops`` prints at the end of a session. ``--json`` writes every outcome.
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ops.catalog import DTYPE_BY_NAME, DTYPE_NAMES, DTYPES, NOT_APPLICABLE, core_aten_ops  # noqa: E402
from tests.ops.harness import run_case  # noqa: E402
from tests.ops.report import format_table, outcome_record  # noqa: E402
from tests.ops.samples import samples_for  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", help="comma-separated dtype names (default: all in scope)")
    parser.add_argument("--ops", help="comma-separated substrings of op names to keep")
    parser.add_argument("--json", type=Path, help="write every outcome to this file")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = parser.parse_args()
    dtypes = [DTYPE_BY_NAME[n] for n in args.dtypes.split(",")] if args.dtypes else list(DTYPES)
    wanted = args.ops.split(",") if args.ops else None

    start = time.perf_counter()
    records = []
    for op in core_aten_ops():
        if str(op) in NOT_APPLICABLE or (wanted and not any(w in str(op) for w in wanted)):
            continue
        for dtype in dtypes:
            samples = samples_for(op, dtype)
            if not samples:
                continue
            outcome = run_case(op, dtype, samples)
            records.append(outcome_record(outcome))
            if args.verbose:
                print(f"{str(op):50} {DTYPE_NAMES[dtype]:9} {outcome.summary()}", flush=True)
    print(format_table(records, f"Core ATen op coverage ({time.perf_counter() - start:.0f} s)"))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    return 0 if all(r["status"] == "PASS" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
