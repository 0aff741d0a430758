"""A pytest plugin for tests/lanes: marks every collected test ``slow`` before the lanes deselect, as a commit
that marks too much would (``-p tests.lanes.mark_all_slow``)."""
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.slow)
