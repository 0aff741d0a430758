"""Test setup for the etkit-coreml plugin from a source checkout.

Puts ``plugins/coreml`` on ``sys.path`` when ``etkit_coreml`` is not installed, and the repository root
so that ``tests.interop.oracle`` (the ExecuTorch oracle runner) can be imported.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PLUGIN_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = Path(__file__).resolve().parents[3]

if importlib.util.find_spec("etkit_coreml") is None:
    sys.path.insert(0, str(PLUGIN_ROOT))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def pytest_configure(config):
    # coremltools warns about its own deprecated registry API and numpy casts on every conversion
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:coremltools.*")
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:coremltools.*")
