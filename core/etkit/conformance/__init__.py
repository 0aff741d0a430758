"""The backend conformance suite, shipped as a pytest plugin for plugin authors.

    pytest --etkit-backend mybackend          # entry-point name or backend id; from any directory

For the backend's default-constructed partitioner, every program of :data:`cases.CASES` (single ops and
small models) is lowered with ``etkit.to_edge_transform_and_lower``, written to a ``.pte``, loaded with
``etkit.runtime.Runtime`` and run. A program with anything delegated must match torch eager (float32:
``atol = rtol = 1e-4`` unless the backend declares otherwise through ``BackendSpec.conformance_tolerance``);
a program with nothing delegated is skipped as ``not delegated: <reasons from the partition
report>``. Contract checks: tags only on nodes the partitioner supports, with this backend's
``DelegationSpec``; deterministic ``preprocess``; the init/execute/destroy lifecycle; registration (the
runtime module registers the backend id; the CMake package's static library defines the register
function). A backend unavailable here gets its runtime tests skipped with the reason; lowering checks
still run.

Modules: :mod:`.pytest_plugin` (options, collection, summary), :mod:`.suite` (the tests),
:mod:`.checks` (the checks as plain functions), :mod:`.cases` (the programs).
"""
