"""Backend plugins: the hook contract (:mod:`.hookspecs`), specs and discovery."""
import pluggy

from .hookspecs import PLUGIN_API_VERSION
from .spec import Availability, BackendSpec, load_object
from .manager import (BackendNotFoundError, EtkitPluginManager, PluginError, backend_behaviour, get_backend_spec,
                      get_backend_specs, get_plugin_manager, reset_plugin_manager)

#: Decorator for hook implementations in plugin modules.
hookimpl = pluggy.HookimplMarker("etkit")

__all__ = ["Availability", "BackendNotFoundError", "BackendSpec", "EtkitPluginManager", "PLUGIN_API_VERSION",
           "backend_behaviour",
           "PluginError", "get_backend_spec", "get_backend_specs", "get_plugin_manager", "hookimpl",
           "load_object", "reset_plugin_manager"]
