"""Test setup for the etkit-ethosu plugin from a source checkout.

Puts ``plugins/ethosu`` on ``sys.path`` when ``etkit_ethosu`` is not installed, and the repository root
so that ``tests.interop.oracle`` (the ExecuTorch oracle runner) can be imported.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

PLUGIN_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = Path(__file__).resolve().parents[3]

if importlib.util.find_spec("etkit_ethosu") is None:
    sys.path.insert(0, str(PLUGIN_ROOT))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# the TOSA reference model attaches gdb to print a backtrace on an invalid graph (slow and noisy)
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")
