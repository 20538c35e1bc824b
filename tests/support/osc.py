"""The ``openstack`` command run in the test's own process.

A subprocess per command costs seconds (the interpreter, then every plugin's
entry points); ``openstackclient.shell.main`` in-process costs about a tenth
of a second. The command sees only the ``OS_*`` variables it is given, its
output is captured, the warnings the clients raise are ignored inside the
call only (tests keep warnings as errors), and the logging set-up the CLI
does to the root logger is undone afterwards.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class OscResult:
    code: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(overrides: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` without the caller's ``OS_*`` variables, plus ``overrides``."""
    saved = dict(os.environ)
    try:
        for name in [name for name in os.environ if name.startswith("OS_")]:
            del os.environ[name]
        os.environ.update(overrides)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logger.level for name, logger in logging.root.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
        for name, logger in logging.root.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))
        logging.captureWarnings(False)


def _forget_clients() -> None:
    """Drop the service clients the last command made.

    osc-lib caches each service's client on the ``ClientManager`` class,
    not on the instance: without this, a command would reuse the previous
    command's client, with its token and endpoints, even for another cloud.
    """
    from osc_lib import clientmanager

    classes = [clientmanager.ClientManager, *clientmanager.ClientManager.__subclasses__()]
    for manager_class in classes:
        for value in vars(manager_class).values():
            if isinstance(value, clientmanager.ClientCache):
                value._handle = None


def run(argv: list[str], env: Mapping[str, str] | None = None) -> OscResult:
    """Run ``openstack *argv``; (exit code, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with _environment(env or {}), _logging_restored(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Imported here: the clients warn about their own deprecations on import.
        from openstackclient import shell

        _forget_clients()

        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = shell.main(list(argv))
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    return OscResult(code or 0, stdout.getvalue(), stderr.getvalue())
