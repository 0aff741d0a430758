"""The native runner fixtures of tests/runtime (etkit_runner, built with `make native` or on demand)."""
from tests.runtime.conftest import etkit_runner, native_build  # noqa: F401  (pytest fixtures)
