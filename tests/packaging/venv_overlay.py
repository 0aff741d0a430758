"""A fresh virtual environment that borrows torch (and friends) from the running one, read-only.

Installing a second torch costs gigabytes and minutes, so the packaging tests make a new venv whose
site-packages holds one ``.pth`` line pointing at an *overlay* directory: symlinks to the files of a
chosen set of distributions (and everything they depend on) from the running environment. pip sees
those distributions as installed, so ``pip install --no-index etkit-*.whl`` resolves against them and
installs only etkit's own wheels into the new venv; the etkit installs of the running environment
(editable ones included) are not visible there.
"""
from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dependency_closure(roots: list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``roots`` need, recursively (environment markers evaluated, extras
    not followed); roots that are not installed raise ``PackageNotFoundError``."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _normalize(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in map(_normalize, roots):
                raise
            continue  # an optional dependency that is not installed here
        seen[name] = dist
        for req in dist.requires or []:
            spec, _, marker = req.partition(";")
            if "extra" in marker:
                continue
            if marker.strip() and not _marker_holds(marker):
                continue
            match = _NAME.match(spec.strip())
            if match:
                todo.append(match.group(0))
    return list(seen.values())


def _marker_holds(marker: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:  # pip's vendored copy
        from pip._vendor.packaging.markers import Marker
    return Marker(marker.strip()).evaluate()


def make_overlay(overlay: Path, roots: list[str]) -> list[str]:
    """Fill ``overlay`` with symlinks to the top-level files of ``roots`` and their dependencies.

    Returns the names of the distributions linked.
    """
    overlay.mkdir(parents=True, exist_ok=True)
    purelib = Path(sysconfig.get_paths()["purelib"]).resolve()
    names = []
    for dist in dependency_closure(roots):
        names.append(dist.metadata["Name"])
        tops = set()
        for f in dist.files or []:
            parts = Path(f).parts
            if parts and parts[0] != ".." and not parts[0].endswith(".pth"):
                tops.add(parts[0])
        for top in tops:
            source = purelib / top
            target = overlay / top
            if source.exists() and not target.exists():
                target.symlink_to(source)
    return sorted(names)


def make_venv(path: Path, overlay: Path) -> Path:
    """A new venv at ``path`` (with pip) that sees ``overlay``; returns its python executable."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_etkit_test_overlay.pth").write_text(str(overlay) + "\n")
    # the venv's own (older) setuptools would shadow the overlay's, which torch's metadata requires
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True,
                   capture_output=True)
    return python
