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
