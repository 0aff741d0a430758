"""Fixtures for the etkit-xnnpack tests.

The tests need the plugin's generated flatbuffer code (``etkit_xnnpack.fb``, produced by the plugin
build); payload tests skip with a clear reason when it is missing. The plugin is registered with etkit
in-process when no installed entry point provides it (source checkout).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "oracle"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HAVE_FB = importlib.util.find_spec("etkit_xnnpack.fb") is not None
requires_fb = pytest.mark.skipif(
    not HAVE_FB, reason="etkit_xnnpack.fb (generated from schema/xnnpack_graph.fbs at build time) is missing; "
                        "build/install the plugin: pip install plugins/xnnpack")


@pytest.fixture(scope="session", autouse=True)
def _register_plugin():
    from helpers import ensure_plugin_registered
    ensure_plugin_registered()
