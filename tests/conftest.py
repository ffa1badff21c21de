"""Session hooks: the default suite's learning runs start in the background once the tests are collected, and the
tests that read them run last (``tests/integration/learning_runs.py`` says why)."""

from __future__ import annotations

from tests.integration import learning_runs


def _run_of(item):
    marker = item.get_closest_marker(learning_runs.MARKER)
    return marker.args[0] if marker else None


def pytest_configure(config):
    config.addinivalue_line("markers", f"{learning_runs.MARKER}(name): the test reads the background learning run "
                            "`name` (tests/integration/learning_runs.py)")


def pytest_collection_modifyitems(session, config, items):
    # Stable: the learning tests keep their order among themselves, after every other test.
    items.sort(key=lambda item: _run_of(item) is not None)


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    learning_runs.start([name for name in (_run_of(item) for item in session.items) if name])


def pytest_sessionfinish(session, exitstatus):
    learning_runs.stop()
