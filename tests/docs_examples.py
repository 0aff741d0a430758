"""The Python examples of the docs, run as written by the tests that check them (each test states what the
example must print)."""
from __future__ import annotations

import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def docs_example(page: str, heading: str) -> str:
    """The first ```python block after the Markdown heading ``heading`` (e.g. ``"## Errors"``) of
    ``docs/<page>``; fails the test when the page lost it."""
    return _example(DOCS / page, heading)


def readme_example(heading: str) -> str:
    """The same for the top-level README.md."""
    return _example(DOCS.parent / "README.md", heading)


def _example(path: pathlib.Path, heading: str) -> str:
    text = path.read_text()
    found = re.search(re.escape(heading) + r"\n.*?```python\n(.*?)```", text, re.S)
    assert found, f"{path.name} lost its example under {heading!r}"
    return found.group(1)


def run_docs_example(page: str, heading: str) -> str:
    """Runs :func:`docs_example` as a module of its own and returns its source."""
    source = docs_example(page, heading)
    exec(compile(source, f"docs/{page}", "exec"), {"__name__": "docs_example"})
    return source
