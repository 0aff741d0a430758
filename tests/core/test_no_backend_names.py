"""The core never names a backend: every backend arrives through a plugin."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"xnnpack|coreml|vulkan|qnn|ethos", re.IGNORECASE)


def test_core_and_runtime_name_no_backend():
    offenders = []
    for folder in ("core", "runtime-cpp", "schema"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix in {".pyc", ".so", ".a", ".o"}:
                continue
            for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if FORBIDDEN.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not offenders, "backend names in the core:\n" + "\n".join(offenders)
