"""Test setup for the etkit-vulkan plugin.

The tests run on a real Vulkan device: Mesa's lavapipe (a Vulkan 1.3 CPU device) on machines without a
GPU; `make` installs it (scripts/setup_system.sh). They fail, rather than skip, when no device exists,
with the plugin's reason: a skipped GPU test suite proves nothing.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
for p in (str(Path(__file__).parent), str(REPO_ROOT), str(REPO_ROOT / "examples")):
    if p not in sys.path:
        sys.path.insert(0, p)
