"""Fixtures for the etkit-xnnpack tests.

The tests need the plugin's generated flatbuffer code (``etkit_xnnpack.fb``, produced by the plugin
build); payload tests skip with a clear reason when it is missing. The plugin is registered with etkit
in-process when no installed entry point provides it (source checkout).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "oracle"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

@pytest.fixture(scope="session", autouse=True)
def _register_plugin():
    from helpers import ensure_plugin_registered
    ensure_plugin_registered()
