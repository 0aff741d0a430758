"""The coverage table: per dtype, (op, dtype) cases covered / applicable, and what fails and why."""
from __future__ import annotations

from collections import defaultdict

from .catalog import DTYPE_NAMES, NOT_APPLICABLE, core_aten_ops

_FIELDS = ("op", "dtype", "status", "stage", "message", "decomposed_into", "missing_kernels")


def outcome_record(outcome) -> dict:
    """A plain dict of an :class:`~tests.ops.harness.Outcome` (travels in pytest's user_properties)."""
    record = {k: getattr(outcome, k) for k in _FIELDS}
    record["decomposed_into"] = None if outcome.decomposed_into is None else list(outcome.decomposed_into)
    record["missing_kernels"] = list(outcome.missing_kernels)
    return record


def format_table(records: list, title: str = "Core ATen op coverage (etkit portable kernels)") -> str:
    """The coverage table and the list of failing cases, as text."""
    if not records:
        return f"{title}: no cases ran"
    dtypes = [d for d in DTYPE_NAMES.values() if any(r["dtype"] == d for r in records)]
    lines = [title, ""]
    head = f"{'dtype':<10} {'covered':>8} {'applic.':>8} {'%':>6}   {'pass':>5} {'decomp':>6} {'fail':>5} {'error':>5}"
    lines += [head, "-" * len(head)]
    total = defaultdict(int)
    for d in dtypes:
        rows = [r for r in records if r["dtype"] == d]
        passed = [r for r in rows if r["status"] == "PASS"]
        decomp = [r for r in passed if r["decomposed_into"] is not None]
        fail = sum(r["status"] == "FAIL" for r in rows)
        err = sum(r["status"] == "ERROR" for r in rows)
        lines.append(f"{d:<10} {len(passed):>8} {len(rows):>8} {100 * len(passed) / len(rows):>5.1f}%   "
                     f"{len(passed) - len(decomp):>5} {len(decomp):>6} {fail:>5} {err:>5}")
        total["covered"] += len(passed)
        total["rows"] += len(rows)
    lines.append("-" * len(head))
    lines.append(f"{'all cases':<10} {total['covered']:>8} {total['rows']:>8} "
                 f"{100 * total['covered'] / total['rows']:>5.1f}%")
    by_op = defaultdict(list)
    for r in records:
        by_op[r["op"]].append(r)
    full_ops = sum(all(r["status"] == "PASS" for r in rs) for rs in by_op.values())
    lines.append(f"ops with every case covered: {full_ops} / {len(by_op)} tested "
                 f"({len(core_aten_ops())} Core ATen overloads, {len(NOT_APPLICABLE)} not applicable)")
    lines.append("covered = PASS, including ops that export/to_edge decomposes (\"decomp\") when the "
                 "decomposition runs correctly")

    missing = defaultdict(list)
    other = []
    for r in records:
        if r["status"] == "PASS":
            continue
        if r["missing_kernels"]:
            missing[(r["op"], tuple(r["missing_kernels"]))].append(r["dtype"])
        else:
            other.append(r)
    if missing:
        lines += ["", "Missing kernels (op: kernels the program needs that the runtime lacks; dtypes):"]
        for (op, kernels), ds in sorted(missing.items()):
            lines.append(f"  {op}: {', '.join(kernels)}  [{', '.join(ds)}]")
    if other:
        lines += ["", "Failing cases (op [dtypes]: status at stage: message):"]
        grouped = defaultdict(list)
        for r in other:
            first = r["message"].splitlines()[0] if r["message"] else ""
            grouped[(r["op"], r["status"], r["stage"], first[:240])].append(r["dtype"])
        for (op, status, stage, msg), ds in sorted(grouped.items()):
            lines.append(f"  {op} [{', '.join(ds)}]: {status} at {stage}: {msg}")
    return "\n".join(lines)
