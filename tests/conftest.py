"""Shared fixtures: database backends, throw-away databases, configuration.

Tests that take the ``backend`` fixture (directly or through another
fixture) run once per selected backend: ``--backends`` or
``CORRAL_TEST_BACKENDS`` (default ``sqlite,postgresql,mysql``).  A backend
whose server cannot be reached is skipped with the reason, unless
``CORRAL_TEST_REQUIRE_BACKENDS=1`` (as CI sets), which turns that into a
failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import BACKENDS, DatabaseFactory, server_unavailable_reason


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=os.environ.get("CORRAL_TEST_BACKENDS", ",".join(BACKENDS)),
        help="Comma-separated database backends to run database tests on.",
    )


def selected_backends(config: pytest.Config) -> list[str]:
    chosen = [name.strip() for name in config.getoption("--backends").split(",") if name.strip()]
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown:
        raise pytest.UsageError(f"unknown backend(s): {', '.join(unknown)}")
    return chosen


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names): run only on these of the selected backends; 'first' means the first "
        "selected one (for tests of the wire or of drivers, not of storage)",
    )


def backends_for(metafunc: pytest.Metafunc) -> list[str]:
    """The selected backends, narrowed by the test's ``backends`` marker."""
    chosen = selected_backends(metafunc.config)
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None:
        return chosen
    if marker.args == ("first",):
        return chosen[:1]
    return [name for name in chosen if name in marker.args]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", backends_for(metafunc), indirect=True, scope="session")


_REASONS: dict[str, str | None] = {}


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name not in _REASONS:
        _REASONS[name] = server_unavailable_reason(name)
    reason = _REASONS[name]
    if reason is not None:
        if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return name


@pytest.fixture(scope="session")
def database_factory(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseFactory]:
    factory = DatabaseFactory(backend, tmp_path_factory.mktemp(f"db-{backend}"))
    yield factory
    factory.cleanup()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The fuzzers' request counts per service and backend."""
    from tests.support.fuzz import REPORT

    lines = config.stash.get(REPORT, [])
    if lines:
        terminalreporter.section("fuzzed requests")
        for line in lines:
            terminalreporter.write_line(line)


# Tests that run a lab (QEMU machines behind a Redfish emulator, or the
# multi-host lab's namespaces and database clusters) share one worker when
# the suite runs on several (``-n``): two labs at once would halve the CPU
# each machine gets and the lab's measured recovery times with it.
_LAB_GROUP = "labs"


def _is_lab_test(item: pytest.Item) -> bool:
    path = Path(str(item.fspath))
    return path.name.endswith("_lab.py") or "multihost" in path.parts


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # First: xdist's own hook turns the group marks into node ids.
    for item in items:
        if _is_lab_test(item):
            item.add_marker(pytest.mark.xdist_group(_LAB_GROUP))
