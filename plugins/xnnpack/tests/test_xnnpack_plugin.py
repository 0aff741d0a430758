"""The plugin entry point: light to import, registers XnnpackBackend with what the core needs."""
from __future__ import annotations

import subprocess
import sys

from etkit.plugins import BackendSpec


def test_plugin_module_does_not_import_torch():
    code = ("import sys, etkit_xnnpack.plugin, etkit_xnnpack; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plugin_registers_xnnpack_backend_spec():
    import etkit_xnnpack.plugin as plugin

    specs = []
    plugin.etkit_register_backends(register=specs.append)
    assert len(specs) == 1
    spec = specs[0]
    assert isinstance(spec, BackendSpec)
    assert spec.backend_id == "XnnpackBackend"
    assert spec.runtime_module == "etkit_xnnpack._delegate"
    assert spec.register_function == "etkit_xnnpack_register_backends"
    from etkit_xnnpack import XnnpackBackend, XnnpackPartitioner
    assert spec.load_backend_details() is XnnpackBackend
    from etkit.plugins import load_object
    assert load_object(spec.partitioners["XnnpackPartitioner"]) is XnnpackPartitioner


def test_backend_is_found_through_the_core_registry():
    from etkit.plugins import get_backend_spec

    assert get_backend_spec("XnnpackBackend").backend_details == "etkit_xnnpack.preprocess:XnnpackBackend"


def test_partitioner_delegation_spec_names_the_backend():
    from etkit_xnnpack import XnnpackPartitioner

    assert XnnpackPartitioner().delegation_spec.backend_id == "XnnpackBackend"
