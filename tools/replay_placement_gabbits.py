"""Replay upstream Placement's own gabbi scenarios against Corral's Placement.

The YAML scenarios and their fixture classes are read from an installed
``openstack-placement`` package; nothing of upstream's is kept in this
repository. Run this script with a Python that has ``openstack-placement``,
``gabbi``, ``fixtures`` and ``oslotest`` installed, for example:

    python3 -m venv /work/venvs/placement-gabbi
    /work/venvs/placement-gabbi/bin/pip install openstack-placement==16.0.0 gabbi fixtures oslotest
    /work/venvs/placement-gabbi/bin/python tools/replay_placement_gabbits.py

Each scenario file gets a fresh Corral Placement (its WSGI application under
gunicorn, at the root of its own port, as in production) on a fresh
database, started by the ``--corral-python`` interpreter from this checkout.
Upstream's fixtures build their providers, inventories, traits, aggregates
and allocations straight in upstream's database; here the same fixture
classes run with those few helpers redirected to Corral's HTTP API, and the
fixtures' configuration (policy defaults, an open policy, CORS) becomes
Corral's configuration file.
"""

from __future__ import annotations

import argparse
import configparser
import fnmatch
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURE_VERSION = "1.39"

# Scenarios whose failure is expected, and why: (file, test name) -> reason.
EXPECTED = {
    ("with-allocations.yaml", "change inventory despite capacity exceeded"):
        "Corral refuses inventory below what is allocated (documented; "
        "--accept-inventory-below-usage sets [placement] refuse_inventory_below_usage = False)",
    ("basic-http.yaml", "bad content length not int"):
        "gunicorn answers a non-numeric Content-Length with its own 400 before any application "
        "sees the request (upstream's application under gunicorn too); upstream replays it in-process",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ Corral


class CorralPlacement:
    """One Corral Placement process on a fresh database."""

    def __init__(self, python: str, workdir: Path, database: Database, log: Path, port: int) -> None:
        self.python = python
        self.workdir = workdir
        self.database = database
        self.log = log
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, options: dict[str, dict[str, str]]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        sections = {
            "api": {"auth_strategy": "noauth2"},
            "placement_database": {"connection": self.database.fresh(self.workdir)},
        }
        for group, values in options.items():
            sections.setdefault(group, {}).update(values)
        config_file = self.workdir / "corral.conf"
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_dict(sections)
        with open(config_file, "w", encoding="utf-8") as handle:
            parser.write(handle)
        env = {**os.environ, "CORRAL_CONFIG_FILE": str(config_file), "CORRAL_DATA_DIR": str(self.workdir)}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [self.python, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}", "--workers", "1",
                 "--worker-class", "gthread", "--threads", "8", "--log-level", "warning",
                 "corral.wsgi:placement()"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Corral exited with {self.process.returncode}; see {self.log}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", "/")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"Corral did not answer on port {self.port}; see {self.log}")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


class Database:
    """A fresh, migrated Placement database for each scenario file.

    SQLite: copies of one migrated file.  PostgreSQL and MariaDB: a database
    created and migrated per file, dropped when the file is done.
    """

    _ADMIN = ("import sys, sqlalchemy as sa\n"
              "engine = sa.create_engine(sys.argv[1], isolation_level='AUTOCOMMIT')\n"
              "with engine.connect() as conn:\n"
              "    for statement in sys.argv[2:]:\n"
              "        conn.execute(sa.text(statement))\n"
              "engine.dispose()\n")
    _MIGRATE = ("import sys\n"
                "from corral.core import migrations\n"
                "from corral.core.db import create_engine\n"
                "from corral.placement.db.schema import TREE\n"
                "engine = create_engine(sys.argv[1])\n"
                "migrations.upgrade(engine, TREE)\n"
                "engine.dispose()\n")

    def __init__(self, kind: str, python: str, workdir: Path, server_url: str | None) -> None:
        self.kind = kind
        self.python = python
        self.workdir = workdir
        self.server_url = (server_url or "").rstrip("/")
        self.count = 0
        self.template: Path | None = None
        self.current: str | None = None

    def _run(self, code: str, *args: str) -> None:
        subprocess.run([self.python, "-c", code, *args], cwd=REPO, check=True)

    def _admin(self, *statements: str) -> None:
        admin_url = self.server_url + ("/postgres" if self.kind == "postgresql" else "/")
        self._run(self._ADMIN, admin_url, *statements)

    def fresh(self, run_dir: Path) -> str:
        if self.kind == "sqlite":
            if self.template is None:
                self.template = self.workdir / "template.sqlite"
                self._run(self._MIGRATE, f"sqlite:///{self.template}")
            target = run_dir / "placement.sqlite"
            shutil.copyfile(self.template, target)
            return f"sqlite:///{target}"
        self.count += 1
        self.current = f"corral_gabbi_{os.getpid()}_{self.count}"
        self._admin(f"CREATE DATABASE {self.current}")
        url = f"{self.server_url}/{self.current}"
        self._run(self._MIGRATE, url)
        return url

    def release(self) -> None:
        if self.current is not None:
            self._admin(f"DROP DATABASE IF EXISTS {self.current}")
            self.current = None


# ------------------------------------------------------------------ fixtures through the HTTP API


class FixtureApi:
    """What upstream's fixtures write into the database, sent to Corral instead."""

    def __init__(self, port: int) -> None:
        self.port = port

    def call(self, method: str, path: str, body: Any = None, version: str = FIXTURE_VERSION) -> Any:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"X-Auth-Token": "admin", "Accept": "application/json",
                   "OpenStack-API-Version": f"placement {version}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if response.status >= 400:
            raise RuntimeError(f"{method} {path} -> {response.status}: {data.decode(errors='replace')}")
        return json.loads(data) if data else None

    def generation(self, uuid: str) -> int:
        return self.call("GET", f"/resource_providers/{uuid}")["generation"]

    def ensure_class(self, name: str) -> None:
        if name.startswith("CUSTOM_"):
            self.call("PUT", f"/resource_classes/{name}", version="1.7")

    def ensure_trait(self, name: str) -> None:
        if name.startswith("CUSTOM_"):
            self.call("PUT", f"/traits/{name}")


class Provider:
    def __init__(self, api: FixtureApi, context: Any, uuid: str, name: str) -> None:
        self.api = api
        self._context = context
        self.uuid = uuid
        self.name = name

    def set_aggregates(self, aggregates: list[str]) -> None:
        self.api.call("PUT", f"/resource_providers/{self.uuid}/aggregates",
                      {"aggregates": list(aggregates), "resource_provider_generation": self.api.generation(self.uuid)})


class Party:
    """A user or project: upstream keeps rows for them, Corral takes them from allocations."""

    def __init__(self, context: Any = None, external_id: str = "") -> None:
        self.external_id = external_id

    def create(self) -> None:
        pass


class Consumer:
    def __init__(self, uuid: str, user: Party, project: Party) -> None:
        self.uuid = uuid
        self.user = user
        self.project = project


def _redirect_fixture_helpers(current: Callable[[], FixtureApi]) -> None:
    """Point the helpers upstream's gabbi fixtures call at Corral's API."""
    from oslo_utils import uuidutils
    from oslo_utils.fixture import uuidsentinel
    from placement.objects import project as project_obj
    from placement.objects import resource_class as rc_obj
    from placement.objects import user as user_obj
    from placement.tests.functional.db import test_base

    def create_provider(context: Any, name: str, *aggregates: str, **kwargs: Any) -> Provider:
        uuid = kwargs.get("uuid") or getattr(uuidsentinel, name)
        body = {"name": name, "uuid": uuid}
        if kwargs.get("parent"):
            body["parent_provider_uuid"] = kwargs["parent"]
        current().call("POST", "/resource_providers", body)
        provider = Provider(current(), context, uuid, name)
        if aggregates:
            provider.set_aggregates(list(aggregates))
        return provider

    def add_inventory(provider: Provider, resource_class: str, total: int, **kwargs: Any) -> dict[str, Any]:
        api = current()
        api.ensure_class(resource_class)
        kwargs.setdefault("max_unit", total)
        body = {"resource_class": resource_class, "total": total, **kwargs,
                "resource_provider_generation": api.generation(provider.uuid)}
        api.call("POST", f"/resource_providers/{provider.uuid}/inventories", body)
        return body

    def set_traits(provider: Provider, *traits: str) -> list[str]:
        api = current()
        for trait in traits:
            api.ensure_trait(trait)
        api.call("PUT", f"/resource_providers/{provider.uuid}/traits",
                 {"traits": list(traits), "resource_provider_generation": api.generation(provider.uuid)})
        return list(traits)

    def ensure_consumer(context: Any, user: Party, project: Party, consumer_id: str | None = None) -> Consumer:
        return Consumer(consumer_id or uuidutils.generate_uuid(), user, project)

    def set_allocation(context: Any, provider: Provider, consumer: Consumer, used: dict[str, int]) -> None:
        api = current()
        existing = api.call("GET", f"/allocations/{consumer.uuid}", version="1.28")
        api.call("PUT", f"/allocations/{consumer.uuid}", {
            "allocations": {provider.uuid: {"resources": dict(used)}},
            "project_id": consumer.project.external_id,
            "user_id": consumer.user.external_id,
            "consumer_generation": existing.get("consumer_generation"),
        }, version="1.28")

    def create_user_and_project(context: Any, prefix: str = "fake") -> tuple[Party, Party]:
        return Party(external_id=f"{prefix}-user"), Party(external_id=f"{prefix}-project")

    class ResourceClass:
        def __init__(self, context: Any = None, name: str = "") -> None:
            self.name = name

        def create(self) -> None:
            current().ensure_class(self.name)

    test_base.create_provider = create_provider
    test_base.add_inventory = add_inventory
    test_base.set_traits = set_traits
    test_base.ensure_consumer = ensure_consumer
    test_base.set_allocation = set_allocation
    test_base.create_user_and_project = create_user_and_project
    test_base.ensure_rc = lambda context, name: current().ensure_class(name)
    user_obj.User = Party
    project_obj.Project = Party
    rc_obj.ResourceClass = ResourceClass


class _RecordedConfig:
    """Stands in for upstream's config fixture: remembers options for Corral's file."""

    def __init__(self, options: dict[str, dict[str, str]]) -> None:
        self.options = options

    def config(self, group: str = "DEFAULT", **values: Any) -> None:
        for key, value in values.items():
            text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
            self.options.setdefault(group, {})[key] = text


class _RecordedPolicy:
    """Stands in for upstream's policy fixture: rules go to a policy file for Corral."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def set_rules(self, rules: dict[str, str], overwrite: bool = True) -> None:
        self.rules.update(rules)


# Variables upstream's base fixture puts in the environment for the scenarios.
_ENVIRON_UUIDS = (
    "RP_UUID", "RP_NAME", "RP_UUID1", "RP_NAME1", "RP_UUID2", "RP_NAME2", "PROJECT_ID",
    "ADMIN_PROJECT_ID", "SERVICE_PROJECT_ID", "USER_ID", "PROJECT_ID_ALT", "USER_ID_ALT",
    "INSTANCE_UUID", "MIGRATION_UUID", "CONSUMER_UUID", "PARENT_PROVIDER_UUID", "ALT_PARENT_PROVIDER_UUID",
)
_ENVIRON_CLASSES = {"CUSTOM_RES_CLASS": "CUSTOM_IRON_NFV", "CUSTOM_RES_CLASS1": "CUSTOM_IRON_NFV1",
                    "CUSTOM_RES_CLASS2": "CUSTOM_IRON_NFV2"}


class Session:
    """The Corral process serving the scenario file being replayed."""

    def __init__(self, python: str, workdir: Path, database: Database, log: Path) -> None:
        self.python = python
        self.workdir = workdir
        self.database = database
        self.log = log
        self.server: CorralPlacement | None = None
        self.api: FixtureApi | None = None
        self.options: dict[str, dict[str, str]] = {}
        self.policy = _RecordedPolicy()
        self.runs = 0
        self.placement_options: dict[str, str] = {}
        # gabbi fixes host and port when it builds a file's tests, before
        # the file's fixture starts Corral: the port is chosen beforehand.
        self.port = 0

    def begin(self, secure_rbac: bool) -> tuple[_RecordedConfig, _RecordedPolicy]:
        self.options = {"oslo_policy": {"enforce_new_defaults": str(secure_rbac)},
                        "placement": dict(self.placement_options)}
        self.policy = _RecordedPolicy()
        return _RecordedConfig(self.options), self.policy

    def ensure_started(self) -> FixtureApi:
        if self.api is None:
            self.runs += 1
            run_dir = self.workdir / f"run-{self.runs}"
            run_dir.mkdir(parents=True, exist_ok=True)
            if self.policy.rules:
                policy_file = run_dir / "policy.yaml"
                policy_file.write_text(json.dumps(self.policy.rules))
                self.options.setdefault("oslo_policy", {})["policy_file"] = str(policy_file)
            self.server = CorralPlacement(self.python, run_dir, self.database, self.log, self.port)
            self.server.start(self.options)
            self.api = FixtureApi(self.server.port)
        return self.api

    def end(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.database.release()
        self.server = None
        self.api = None


def fixture_module(session: Session) -> types.ModuleType:
    """Upstream's fixture classes, each starting a fresh Corral instead of upstream's app."""
    from oslo_utils import uuidutils
    from placement.tests.functional.fixtures import gabbits as upstream

    _redirect_fixture_helpers(session.ensure_started)

    def start_base(self: Any) -> None:
        self.conf_fixture, self.policy_fixture = session.begin(getattr(self, "_secure_rbac", False))
        self.context = None
        for name in _ENVIRON_UUIDS:
            os.environ[name] = uuidutils.generate_uuid()
        os.environ.update(_ENVIRON_CLASSES)

    def stop_base(self: Any) -> None:
        session.end()

    upstream.APIFixture.start_fixture = start_base
    upstream.APIFixture.stop_fixture = stop_base

    module = types.ModuleType("corral_gabbi_fixtures")
    for name in dir(upstream):
        value = getattr(upstream, name)
        if isinstance(value, type) and issubclass(value, upstream.APIFixture):

            def start(self: Any, _base: type = value) -> None:
                try:
                    _base.start_fixture(self)
                    # CORS and policy settings are known only now: start Corral
                    # if the fixture did not need it to build its data.
                    session.ensure_started()
                except BaseException:
                    # gabbi does not stop a fixture that failed to start.
                    session.end()
                    raise

            setattr(module, name, type(name, (value,), {"start_fixture": start}))
    return module


# ------------------------------------------------------------------ running


def _send_what_httpx_refuses() -> None:
    """Let requests with deliberately broken headers reach the server.

    Upstream replays its scenarios in-process, where nothing checks headers
    on the way; over a socket httpx refuses to send, for example, a
    ``Content-Length: hi mom``.  Such a request is sent as is with
    http.client, and its answer handed back to gabbi in httpx's form.
    """
    from urllib.parse import urlsplit

    import httpx
    from gabbi import httpclient

    send = httpclient.Http.request

    def request(self: Any, absolute_uri: str, method: str, body: Any, headers: dict[str, str],
                redirect: bool, timeout: float) -> tuple[Any, bytes]:
        try:
            return send(self, absolute_uri, method, body, headers, redirect, timeout)
        except httpx.LocalProtocolError:
            pass
        target = urlsplit(absolute_uri)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=timeout)
        connection.putrequest(method, target.path + (f"?{target.query}" if target.query else ""),
                              skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body.encode() if isinstance(body, str) else body)
        response = connection.getresponse()
        content = response.read()
        answer = httpx.Headers(response.getheaders())
        answer["status"] = str(response.status)
        answer["reason"] = response.reason
        answer["http_protocol_version"] = "HTTP/1.1"
        return answer, content

    httpclient.Http.request = request


class _Result(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.passed: list[unittest.TestCase] = []

    def addSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802 (unittest's name)
        super().addSuccess(test)
        self.passed.append(test)


def _essence(text: str) -> str:
    """The assertion of a failure without gabbi's traceback."""
    start = text.find("AssertionError")
    return (text[start:] if start >= 0 else text.strip().splitlines()[-1]).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corral-python", default=os.environ.get("CORRAL_PYTHON", "python3"),
                        help="Interpreter with Corral's dependencies (runs this checkout).")
    parser.add_argument("--db", choices=["sqlite", "postgresql", "mysql"], default="sqlite")
    parser.add_argument("--db-url", help="Server URL without a database name "
                        "(default postgresql+psycopg://postgres@127.0.0.1:5432 or mysql+pymysql://root@127.0.0.1:3306).")
    parser.add_argument("-k", "--only", action="append", default=[],
                        help="Replay only files matching this glob (repeatable), e.g. 'reshaper*'.")
    parser.add_argument("--accept-inventory-below-usage", action="store_true",
                        help="Run Corral with upstream's inventory rule "
                        "([placement] refuse_inventory_below_usage = False).")
    parser.add_argument("-v", "--verbose", action="store_true", help="Print each failure's assertion.")
    parser.add_argument("--workdir", help="Keep databases and logs here (default: a temporary directory).")
    args = parser.parse_args()

    import placement
    import placement.tests.functional as upstream_functional

    gabbits = Path(upstream_functional.__file__).parent / "gabbits"
    files = sorted(gabbits.glob("*.yaml"))
    if args.only:
        files = [path for path in files if any(fnmatch.fnmatch(path.name, pattern) for pattern in args.only)]

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="corral-gabbi-"))
    workdir.mkdir(parents=True, exist_ok=True)
    default_urls = {"postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432",
                    "mysql": "mysql+pymysql://root@127.0.0.1:3306"}
    database = Database(args.db, args.corral_python, workdir, args.db_url or default_urls.get(args.db))
    session = Session(args.corral_python, workdir, database, workdir / "corral.log")
    if args.accept_inventory_below_usage:
        session.placement_options["refuse_inventory_below_usage"] = "False"
    module = fixture_module(session)
    _send_what_httpx_refuses()

    print(f"upstream scenarios: openstack-placement from {Path(placement.__file__).parent}", flush=True)
    print(f"database: {args.db}; logs and databases in {workdir}", flush=True)
    try:
        results = _replay(files, gabbits, session, module, args.verbose)
    finally:
        session.end()
    files_passed, tests_passed, tests_total, expected, unexpected = results
    print(f"\n{files_passed}/{len(files)} scenario files passed; {tests_passed}/{tests_total} tests passed")
    for name, reason in expected:
        print(f"expected failure: {name}: {reason}")
    print(f"unexpected failures: {unexpected}")
    return 0 if unexpected == 0 else 1


def _replay(files: list[Path], gabbits: Path, session: Session, module: types.ModuleType, verbose: bool
            ) -> tuple[int, int, int, list[tuple[str, str]], int]:
    from gabbi import handlers, suitemaker, utils

    handler_objects = [handler() for handler in handlers.RESPONSE_HANDLERS]
    loader = unittest.TestLoader()
    files_passed = tests_passed = tests_total = 0
    expected: list[tuple[str, str]] = []
    unexpected = 0
    for path in files:
        suite_dict = utils.load_yaml(yaml_file=str(path), safe=True)
        session.port = _free_port()
        suite = suitemaker.test_suite_from_dict(
            loader, path.stem, suite_dict, str(gabbits), "127.0.0.1", session.port, module, None,
            handlers=handler_objects, test_loader_name=__name__,
        )
        result = _Result()
        suite.run(result)
        total = result.testsRun
        tests_total += total
        tests_passed += len(result.passed)
        ok = len(result.passed) == total and not result.failures and not result.errors
        files_passed += ok
        print(f"{'ok  ' if ok else 'FAIL'} {path.name}: {len(result.passed)}/{total}", flush=True)
        for test, text in result.failures + result.errors:
            name = getattr(test, "test_data", {}).get("name") or str(test)
            reason = EXPECTED.get((path.name, name))
            if reason:
                expected.append((f"{path.name}: {name}", reason))
            else:
                unexpected += 1
            print(f"     - {name}{' (expected)' if reason else ''}", flush=True)
            if verbose:
                print("       " + _essence(text).replace("\n", "\n       "), flush=True)
    return files_passed, tests_passed, tests_total, expected, unexpected


if __name__ == "__main__":
    sys.exit(main())
