"""etkit's developer tools, named as ExecuTorch's ``executorch.devtools`` (seed page "Introduction to the
ExecuTorch Developer Tools").

    from etkit.devtools import BundledProgram      # or etkit.devtools.bundled_program.core
    from etkit.devtools import Inspector           # ETDump tables (etkit.devtools.inspector)

Names load on first use, so importing this package costs nothing.
"""
import importlib

_LAZY = {
    "BundledProgram": "etkit.devtools.bundled_program.core",
    "Inspector": "etkit.devtools.inspector",
    "TimeScale": "etkit.devtools.inspector",
    "compare_results": "etkit.devtools.inspector",
    "ETRecord": "etkit.devtools.etrecord",
    "generate_etrecord": "etkit.devtools.etrecord",
    "parse_etrecord": "etkit.devtools.etrecord",
    "NumericalComparatorBase": "etkit.devtools.numerical_comparator",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'etkit.devtools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
