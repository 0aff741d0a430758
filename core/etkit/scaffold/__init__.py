"""``etkit new-backend NAME``: write a complete backend plugin distribution to start a vendor backend from.

    from etkit.scaffold import new_backend
    path = new_backend("mynpu", "etkit-mynpu")   # then: pip install --no-build-isolation etkit-mynpu

The plugin (``etkit-<name>``) has the hook implementations (registration, and a payload description for
``etkit inspect``), a partitioner with op configs (float32 elementwise ops, and ``linear`` kept whole
through ``ops_to_not_decompose`` as the worked example of adding an op), a ``preprocess`` writing a small
documented binary graph (shaped values; ops with input and output id lists and int64 parameters), a C++
delegate that validates every field of it, built as a static library with a CMake package (native
runners) and as a shared library the Python runtime loads, and pytest tests against torch eager. It
installs and passes the conformance suite (``pytest --etkit-backend <name>``) as generated.

Templates live in ``templates/`` (package data); ``{{name}}``, ``{{Name}}``, ``{{NAME}}``,
``{{backend_id}}`` and ``{{plugin_api}}`` are replaced in file contents and paths, and the ``.tmpl``
suffix is dropped.
"""
from __future__ import annotations

import keyword
import os
import re
from pathlib import Path
from typing import Optional, Union

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Template files whose rendered name differs from ``<name minus .tmpl>``.
_RENAMES = {"gitignore.tmpl": ".gitignore"}
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: The runtime stores backend ids of at most 63 bytes; ``<Name>Backend`` must fit.
MAX_NAME_LENGTH = 40
_PLACEHOLDER_RE = re.compile(r"\{\{[A-Za-z_]+\}\}")


class ScaffoldError(ValueError):
    """A bad backend name or output directory; the message says what to use instead."""


def camel_case(name: str) -> str:
    """``my_npu`` -> ``MyNpu``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def validate_name(name: str) -> None:
    """Check that ``name`` can name a plugin: a lowercase Python identifier (``[a-z][a-z0-9_]*``).

    Raises:
        ScaffoldError: naming the problem and an example of a valid name.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        hint = re.sub(r"[^a-z0-9_]", "_", str(name).lower()).strip("_") or "mybackend"
        if not hint[0].isalpha():
            hint = "b" + hint
        raise ScaffoldError(
            f"backend name {name!r} is not a lowercase identifier (letters a-z, digits and '_', starting "
            f"with a letter); it names the Python package etkit_<name>, e.g. {hint!r}")
    if keyword.iskeyword(name) or name in {"etkit", "core", "runtime", "plugins"}:
        raise ScaffoldError(f"backend name {name!r} is reserved; choose another, e.g. {name + '_backend'!r}")
    if name.endswith("_") or "__" in name:
        raise ScaffoldError(f"backend name {name!r} has a trailing or doubled '_'; use e.g. "
                            f"{re.sub('_+', '_', name).strip('_')!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise ScaffoldError(f"backend name {name!r} is {len(name)} characters long; use at most {MAX_NAME_LENGTH}")


def substitutions(name: str) -> dict:
    """The placeholder values for ``name`` (already validated)."""
    from ..plugins.hookspecs import PLUGIN_API_VERSION

    camel = camel_case(name)
    return {"name": name, "Name": camel, "NAME": name.upper(), "backend_id": f"{camel}Backend",
            "plugin_api": PLUGIN_API_VERSION}


def _render(text: str, values: dict, where: str) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    leftover = _PLACEHOLDER_RE.search(text)
    if leftover:  # a template bug, never the user's
        raise RuntimeError(f"template {where}: unknown placeholder {leftover.group(0)}")
    return text


def template_files() -> list[Path]:
    """Every template file, relative to :data:`TEMPLATES`, sorted."""
    return sorted(p.relative_to(TEMPLATES) for p in TEMPLATES.rglob("*.tmpl") if p.is_file())


def new_backend(name: str, out_dir: Optional[Union[str, os.PathLike]] = None) -> Path:
    """Write the plugin distribution ``etkit-<name>`` into ``out_dir`` (default ``./etkit-<name>``).

    Args:
        name: the plugin's name: a lowercase identifier (``mynpu``); the package is ``etkit_<name>``, the
            backend id ``<Name>Backend`` (``MynpuBackend``), the entry point ``<name>``.
        out_dir: directory to create (or an existing empty one).
    Returns:
        The directory written, as an absolute path.
    Raises:
        ScaffoldError: ``name`` is not valid, or ``out_dir`` exists and is not an empty directory.
        OSError: the directory cannot be written.
    """
    validate_name(name)
    out = Path(out_dir if out_dir is not None else f"etkit-{name}").resolve()
    if out.exists():
        if not out.is_dir():
            raise ScaffoldError(f"{out} exists and is not a directory; choose another output directory with -o")
        if any(out.iterdir()):
            raise ScaffoldError(f"{out} is not empty; refusing to overwrite it (remove it, or choose another "
                                f"output directory with -o)")
    values = substitutions(name)
    rendered = []
    for rel in template_files():
        target = _RENAMES.get(rel.as_posix(), rel.as_posix()[: -len(".tmpl")])
        target = _render(target, values, rel.as_posix())
        rendered.append((target, _render((TEMPLATES / rel).read_text(), values, rel.as_posix())))
    for target, text in rendered:  # everything rendered first: a template error leaves nothing behind
        path = out / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return out


__all__ = ["MAX_NAME_LENGTH", "ScaffoldError", "camel_case", "new_backend", "substitutions", "template_files",
           "validate_name"]
