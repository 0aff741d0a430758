import contextlib

import pytest

from etkit.plugins import get_plugin_manager

from .toy_backend import ToyPlugin


@pytest.fixture
def toy_plugin():
    """Register the toy backend plugin for one test, then remove it."""
    manager = get_plugin_manager()
    manager.add_plugin(ToyPlugin(), name="toy")
    yield manager
    manager.remove_plugin("toy")


@contextlib.contextmanager
def toy_backend_with(**behaviour):
    """Within the block, the toy backend's ``BackendSpec`` also has ``behaviour``'s fields (e.g.
    ``describe_payload=fn``); the plain toy plugin is back afterwards (use with the ``toy_plugin`` fixture)."""
    manager = get_plugin_manager()
    manager.remove_plugin("toy")
    manager.add_plugin(ToyPlugin(**behaviour), name="toy")
    try:
        yield manager
    finally:
        manager.remove_plugin("toy")
        manager.add_plugin(ToyPlugin(), name="toy")
