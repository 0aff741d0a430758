"""Core ATen op conformance: every Core ATen overload, lowered with no partitioner, on etkit's
portable kernels, compared with torch eager.

For each overload tagged ``torch.Tag.core`` in the installed torch and each dtype of float32,
float16, bfloat16, float64, int8, int16, int32, int64, uint8 and bool that torch supports for it,
the samples of :mod:`tests.ops.samples` (torch's OpInfos, recorded at the ATen level, plus a small
hand-written table) are called in a tiny module (``torch.ops.aten.X.overload(...)``), exported with
``torch.export.export``, lowered with ``etkit.to_edge(ep).to_executorch()``, run by
``etkit.runtime`` and compared with eager: exactly for integer and bool outputs, with the
tolerances of :mod:`tests.ops.catalog` for floats. One test per (op, dtype); its samples share one
program.

Outcomes: PASS (also when export/to_edge decomposes the op and the decomposition runs correctly:
the summary says "decomposed into ..."), FAIL (wrong numbers) or ERROR (export, lowering, loading
or running failed; a missing kernel is named). Ops with no case are in ``catalog.NOT_APPLICABLE``
with the reason; cases known to fail today are ``xfail(strict=True)`` entries of
``catalog.KNOWN_GAPS``, so a fixed case XPASSes and fails the run until its entry is removed.
A coverage table is printed at the end of the session (``tests/ops/conftest.py``);
``python bench/op_coverage.py`` prints the same table without pytest.

Ops that need special handling:

- ``sym_size.int``, ``sym_numel``, ``sym_stride.int`` return sizes, not tensors. With static shapes
  export replaces them by their value, so their samples export the input with a dynamic dimension
  (``Dim``) and the program returns the Python int. ``sym_stride`` is rewritten by export in terms of
  ``sym_size`` and ``sym_numel`` into ``sym_size`` times a constant: both report "decomposed".
  ``sym_storage_offset`` and ``sym_is_contiguous`` are folded to constants even with dynamic shapes
  (an input's offset is 0, its contiguity known): "decomposed into nothing", and the program must
  still return the constant.
- ``_local_scalar_dense`` (``Tensor.item()``) returns a Python scalar computed at run time: the
  program returns it as its output.
- Random ops (``rand``, ``randn``, ``randperm``, ``native_dropout``), uninitialized ones (``empty``,
  ``empty_strided``) and sorts with ties are checked by properties: ``catalog.PROPERTY_CHECKS``.
- An ``out=`` overload (``atan2.out``) is called on a tensor the program allocates; functionalization
  turns it into the functional op, reported as "decomposed".

Running:

    .venv/bin/python -m pytest tests/ops                     # CI slice (~2-3 min, see below)
    ETKIT_OPS_FULL=1 .venv/bin/python -m pytest tests/ops    # every applicable dtype

The CI slice runs, for every op, float32 (or the op's first applicable dtype when torch has no
float32 version, e.g. the bitwise ops), plus int64 and bool wherever torch supports them.
``ETKIT_OPS_DTYPES=float16,int8`` runs just those dtypes; ``ETKIT_OPS_MAX_SAMPLES`` (default 6)
caps the samples per case.
"""
from __future__ import annotations

import functools
import os

import pytest
import torch

from . import catalog
from .catalog import DTYPE_BY_NAME, DTYPE_NAMES, DTYPES, NOT_APPLICABLE, core_aten_ops
from .report import outcome_record
from .samples import SCHEMA_SAMPLES, applicable_dtypes, samples_for

pytest.importorskip("etkit.runtime")

FULL = os.environ.get("ETKIT_OPS_FULL", "") not in ("", "0")
#: dtypes the CI slice adds to each op's first case when torch supports them.
SLICE_EXTRA_DTYPES = (torch.int64, torch.bool)


def _selected_dtypes() -> tuple:
    names = os.environ.get("ETKIT_OPS_DTYPES")
    if names:
        return tuple(DTYPE_BY_NAME[n.strip()] for n in names.split(",") if n.strip())
    return DTYPES


@functools.lru_cache(maxsize=None)
def _cases() -> tuple:
    """``((op, dtype), ...)`` for this session: the full set or the CI slice."""
    wanted = _selected_dtypes()
    cases = []
    for op in core_aten_ops():
        if str(op) in NOT_APPLICABLE:
            continue
        if FULL or os.environ.get("ETKIT_OPS_DTYPES"):
            dtypes = applicable_dtypes(op, wanted)
        else:
            dtypes = applicable_dtypes(op, (torch.float32,) + SLICE_EXTRA_DTYPES)
            if not dtypes:  # no float32/int64/bool version: the op's first applicable dtype
                others = [d for d in DTYPES if d not in dtypes]
                dtypes = next(([d] for d in others if samples_for(op, d, limit=1)), [])
        cases += [(op, d) for d in dtypes]
    return tuple(cases)


def _params() -> list:
    params = []
    for op, dtype in _cases():
        name, dname = str(op), DTYPE_NAMES[dtype]
        marks = []
        gap = catalog.known_gap(name, dname)
        if gap:
            marks.append(pytest.mark.xfail(strict=True, reason=f"known gap: {gap}"))
        params.append(pytest.param(op, dtype, id=f"{name}-{dname}", marks=marks))
    return params


@pytest.mark.parametrize("op,dtype", _params())
def test_core_aten_op_matches_eager(op, dtype, record_property):
    from .harness import run_case

    samples = samples_for(op, dtype)
    outcome = run_case(op, dtype, samples)
    record_property("etkit_op_outcome", outcome_record(outcome))
    assert outcome.status == "PASS", f"{op} {DTYPE_NAMES[dtype]}: {outcome.summary()}"


def test_every_core_op_has_a_case_or_a_written_reason():
    """A Core ATen op with no sample would silently drop out of the coverage table."""
    if os.environ.get("ETKIT_OPS_DTYPES"):
        pytest.skip("ETKIT_OPS_DTYPES restricts the dtypes: an op may have none of them")
    tested = {op for op, _ in _cases()}
    without = [str(op) for op in core_aten_ops() if str(op) not in NOT_APPLICABLE and op not in tested]
    assert not without, f"no sample at any dtype (add one to samples.SCHEMA_SAMPLES): {without}"


def test_exception_tables_name_core_ops():
    """Stale entries (an op renamed or no longer core) must not linger in the exception tables."""
    core = {str(op) for op in core_aten_ops()}
    tables = {
        "NOT_APPLICABLE": set(NOT_APPLICABLE),
        "PROPERTY_CHECKS": set(catalog.PROPERTY_CHECKS),
        "TOLERANCE_OVERRIDES": set(catalog.TOLERANCE_OVERRIDES),
        "FLOAT_REFERENCE": set(catalog.FLOAT_REFERENCE),
        "SCHEMA_SAMPLES": set(SCHEMA_SAMPLES),
        "KNOWN_GAPS": {k[0] if isinstance(k, tuple) else k for k in catalog.KNOWN_GAPS},
    }
    for table, names in tables.items():
        assert names <= core, f"{table} names ops that are not Core ATen: {sorted(names - core)}"
    both = tables["KNOWN_GAPS"] & tables["NOT_APPLICABLE"]
    assert not both, f"ops both not applicable and known gaps: {sorted(both)}"
    dtypes = {k[1] for k in catalog.KNOWN_GAPS if isinstance(k, tuple)}
    assert dtypes <= set(DTYPE_NAMES.values()), f"unknown dtype names in KNOWN_GAPS: {dtypes}"
