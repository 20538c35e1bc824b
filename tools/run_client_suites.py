"""Run the clients' own functional suites against Corral: Bare Metal and Image.

The Bare Metal suites, both written by the clients' authors against a real Ironic:

* openstacksdk's ``openstack/tests/functional/baremetal`` (shipped inside
  the openstacksdk package), run with pytest against a Corral serving every
  service with its own identity service: the suite reads ``clouds.yaml``
  entries named ``devstack-admin`` (project admin), ``devstack-system-admin``
  (system scope), ``devstack`` and ``devstack-alt`` (project members), which
  this script writes for the users and projects it creates.
* python-ironicclient's ``ironicclient/tests/functional/osc`` (the
  ``openstack baremetal`` commands through tempest's CLI runner), taken from
  the last sdist that shipped them (python-ironicclient 5.8.0) and run with
  that client release against a Corral with ``noauth`` (every
  request an administrator, as upstream's ``noauth``), as the
  suite's ``[functional] auth_strategy = noauth`` mode expects.

The Image suites, written against a real Glance: openstacksdk's
``openstack/tests/functional/image/v2`` (images, members, schemas) and
``functional/cloud/test_image.py``, and python-openstackclient's
``openstackclient/tests/functional/image/v2`` (``openstack image`` commands),
both shipped inside their packages, run against a Corral with its own
identity service like the sdk suite (metadata definitions, tasks and the
image cache, which Corral's Image service does not offer, are left out).

Nothing of the suites is kept in this repository. The suites run in
virtual environments of their own (``--sdk-venv``, ``--osc-venv``, created
on first use with pinned client versions); Corral runs from this checkout with the
interpreter that runs this script. Each suite gets a fresh Corral on fresh
embedded SQLite databases. The closing lines say ``N passed, N failed`` per
suite and name every failure, with the reason where it is known.

    python tools/run_client_suites.py                 # every suite
    python tools/run_client_suites.py --suite image   # the Image suites
    python tools/run_client_suites.py --suite sdk -k test_node
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import requests
import yaml

REPO = Path(__file__).resolve().parent.parent
# Each suite runs with the clients it was written for: openstacksdk's tests
# ship inside openstacksdk; ironicclient's OSC tests left the project after
# 5.8.0, whose list commands still label their columns ("UUID", "Name")
# where 6.x prints field names, so they run with the 5.8.0 client.
DEFAULT_SDK_VENV = Path("/work/venvs/client-suites")
DEFAULT_OSC_VENV = Path("/work/venvs/client-suites-osc")
SDK_PACKAGES = ["openstacksdk==4.22.0", "pytest", "oslotest", "fixtures", "testtools", "testscenarios",
                "requests-mock"]
OSC_PACKAGES = ["python-ironicclient==5.8.0", "python-openstackclient==10.5.0", "tempest", "pytest", "ddt"]
IRONICCLIENT_TESTS_SDIST = "python-ironicclient==5.8.0"
# python-openstackclient's functional tests run the `openstack` command of the same environment.
IMAGE_SUITE_PACKAGES = ["python-openstackclient==10.5.0", "tempest"]

# Failures that upstream Ironic 39 shows too (run side by side with
# --osc-url): a part of the test id -> reason.
EXPECTED: dict[str, str] = {
    "BaremetalAllocationTests.test_create_negative_02_":
        "the test expects 'Expected UUID for uuid'; Ironic 39 does not check an allocation's uuid and stores "
        "'!@#$^*&%^', Corral refuses it with 400 \"Schema error: '!@#$^*&%^' is not a 'uuid'\"",
    "BaremetalAllocationTests.test_create_negative_11_":
        "the test expects 'Nodes cannot be found'; Ironic 39 checks candidate_nodes with a JSON schema first and "
        "answers \"Schema error: 'banana?' is not valid under any of the given schemas...\", as Corral does",
    "BaremetalDeployTemplateTests.test_create_negative_7_":
        "the test expects jsonschema's old 'is too short'; Ironic 39 and Corral say "
        "'Schema error for template: [] should be non-empty'",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ Corral


class Corral:
    """``corral serve`` from this checkout, on embedded SQLite under ``workdir``."""

    def __init__(self, workdir: Path, auth_strategy: str) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth_strategy = auth_strategy
        self.log_path = workdir / "corral.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Corral:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "corral.conf"
        config.write_text(
            "[api]\n"
            f"auth_strategy = {self.auth_strategy}\n"
            "[catalog]\n"
            f"public_url = {self.url}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for name in [name for name in env if name.startswith("OS_")]:
            del env[name]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "corral", "serve", "--port", str(self.port), "--config-file", str(config),
                 "--data-dir", str(self.workdir / "data")],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"corral exited with {self.process.returncode}; see {self.log_path}")
            try:
                if requests.get(self.url + "/baremetal/", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"corral did not answer on {self.url}; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


# ------------------------------------------------------------------ identity set-up


class Identity:
    """The admin's token and the few calls the set-up needs."""

    def __init__(self, corral: Corral) -> None:
        clouds = yaml.safe_load((corral.workdir / "data" / "clouds.yaml").read_text())
        self.admin = clouds["clouds"]["corral"]["auth"]
        self.auth_url = self.admin["auth_url"]
        self.corral = corral
        response = requests.post(self.auth_url + "/v3/auth/tokens", json={"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": self.admin["username"], "password": self.admin["password"], "domain": {"id": "default"}}}},
            "scope": {"project": {"name": self.admin["project_name"], "domain": {"id": "default"}}},
        }}, timeout=30)
        response.raise_for_status()
        self.headers = {"X-Auth-Token": response.headers["X-Subject-Token"]}

    def _call(self, method: str, path: str, body: Any = None, *, base: str | None = None) -> Any:
        response = requests.request(method, (base or self.auth_url) + path, json=body, headers=self.headers,
                                    timeout=30)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def role_id(self, name: str) -> str:
        roles = self._call("GET", f"/v3/roles?name={name}")["roles"]
        if roles:
            return roles[0]["id"]
        return self._call("POST", "/v3/roles", {"role": {"name": name}})["role"]["id"]

    def member(self, name: str) -> dict[str, str]:
        """A project and a user of the same name with the member role on it."""
        project = self._call("POST", "/v3/projects", {"project": {"name": name, "domain_id": "default"}})["project"]
        password = secrets.token_urlsafe(16)
        user = self._call("POST", "/v3/users", {"user": {
            "name": name, "password": password, "domain_id": "default", "default_project_id": project["id"]}})["user"]
        self._call("PUT", f"/v3/projects/{project['id']}/users/{user['id']}/roles/{self.role_id('member')}")
        return {"username": name, "password": password, "project_name": name}

    def flavor(self) -> None:
        """A flavor with a disk: the sdk's base test picks one whenever Compute is in the catalog."""
        self._call("POST", "/v2.1/flavors", {"flavor": {"name": "baremetal", "ram": 512, "vcpus": 1, "disk": 1}},
                   base=self.corral.url + "/compute")


    def cirros_image(self) -> None:
        """A public qcow2 image named as devstack names CirrOS: the suites' base picks it up."""
        base = self.corral.url + "/image"
        image = self._call("POST", "/v2/images", {"name": "cirros-0.6.3-x86_64-disk", "disk_format": "qcow2",
                                                  "container_format": "bare", "visibility": "public"}, base=base)
        with tempfile.TemporaryDirectory() as scratch:
            disk = Path(scratch) / "cirros.qcow2"
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "1M"], check=True)
            response = requests.put(f"{base}/v2/images/{image['id']}/file", data=disk.read_bytes(),
                                    headers={**self.headers, "Content-Type": "application/octet-stream"}, timeout=30)
        if response.status_code != 204:
            raise RuntimeError(f"uploading the CirrOS stand-in: {response.status_code} {response.text}")


def write_clouds_yaml(path: Path, identity: Identity) -> None:
    def entry(auth: dict[str, str], **extra: Any) -> dict[str, Any]:
        return {
            "auth": {"auth_url": identity.auth_url, "user_domain_id": "default", "project_domain_id": "default",
                     **auth},
            "region_name": "RegionOne", "identity_api_version": 3, **extra,
        }

    admin = {key: identity.admin[key] for key in ("username", "password", "project_name")}
    system_admin = {"username": admin["username"], "password": admin["password"], "system_scope": "all"}
    clouds = {
        "devstack-admin": entry(admin),
        "devstack-system-admin": entry(system_admin),
        "devstack": entry(identity.member("demo")),
        "devstack-alt": entry(identity.member("alt_demo")),
    }
    path.write_text(yaml.safe_dump({"clouds": clouds}))
    path.chmod(0o600)


# ------------------------------------------------------------------ suites


def ensure_venv(venv: Path, packages: list[str]) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return python


def run_pytest(python: Path, args: list[str], cwd: Path, env: dict[str, str], junit: Path,
               log: Path) -> dict[str, str]:
    """Run pytest; return test id -> outcome (``passed``, ``failed``, ``skipped``) with failure text."""
    command = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", f"--junitxml={junit}",
               "-o", "junit_family=xunit1", *args]
    with open(log, "w") as handle:
        subprocess.run(command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    results: dict[str, str] = {}
    if not junit.exists():
        raise RuntimeError(f"pytest wrote no report; see {log}")
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}.{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed: " + _failure_line(child.text or child.get("message") or "")
            elif child.tag == "skipped":
                outcome = "skipped: " + (child.get("message") or "")[:200]
        results[test_id] = outcome
    return results


EXCEPTION_LINE = re.compile(r"^(E\s+)?[\w.]*(Error|Exception|Failed|Failure|MismatchError)\b.*:")


def _failure_line(text: str) -> str:
    """The exception line of a failure's traceback (the last one naming an exception)."""
    lines = [line for line in text.splitlines() if EXCEPTION_LINE.match(line.strip())]
    chosen = lines[-1] if lines else (text.strip().splitlines() or [""])[-1]
    return chosen.strip()[:400]


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OS_", "OPENSTACKSDK_", "PYTHONPATH"))}
    env.update(extra)
    return env


def run_sdk_suite(python: Path, workdir: Path, select: str | None) -> dict[str, str]:
    corral = Corral(workdir / "corral", "corral").start()
    try:
        identity = Identity(corral)
        identity.flavor()
        clouds = workdir / "clouds.yaml"
        write_clouds_yaml(clouds, identity)
        # As the suite's own tox "functional" environment sets them.
        env = clean_env({"OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "devstack-admin",
                         "OS_TEST_TIMEOUT": "600", "OPENSTACKSDK_EXAMPLE_CONFIG_KEY": "functional"})
        args = ["--pyargs", "openstack.tests.functional.baremetal"]
        if select:
            args += ["-k", select]
        return run_pytest(python, args, workdir, env, workdir / "sdk.xml", workdir / "sdk.log")
    finally:
        corral.stop()


IMAGE_SDK_TESTS = ["openstack.tests.functional.image.v2.test_image", "openstack.tests.functional.image.v2.test_member",
                   "openstack.tests.functional.image.v2.test_schema", "openstack.tests.functional.cloud.test_image"]
IMAGE_OSC_TESTS = ["openstackclient.tests.functional.image.v2.test_image",
                   "openstackclient.tests.functional.image.v2.test_info"]


def run_image_suites(python: Path, workdir: Path, select: str | None) -> dict[str, str]:
    """openstacksdk's and python-openstackclient's image tests against one fresh Corral."""
    corral = Corral(workdir / "corral", "corral").start()
    try:
        identity = Identity(corral)
        identity.flavor()
        identity.cirros_image()
        clouds = workdir / "clouds.yaml"
        write_clouds_yaml(clouds, identity)
        env = clean_env({"OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "devstack-admin",
                         "OS_TEST_TIMEOUT": "600", "OPENSTACKSDK_EXAMPLE_CONFIG_KEY": "functional"})
        # The sdk's image tests upload a file of the source tree they expect to run from.
        (workdir / "CONTRIBUTING.rst").write_text("Some image data for the tests to upload.\n" * 100)
        args = ["--pyargs", *IMAGE_SDK_TESTS, *IMAGE_OSC_TESTS]
        if select:
            args += ["-k", select]
        return run_pytest(python, args, workdir, env, workdir / "image.xml", workdir / "image.log")
    finally:
        corral.stop()


def fetch_osc_tests(python: Path, workdir: Path) -> Path:
    """ironicclient's functional tests as the package ``ironicclient_functional`` under ``workdir``."""
    target = workdir / "ironicclient_functional"
    if target.exists():
        shutil.rmtree(target)
    download = workdir / "sdist"
    download.mkdir(exist_ok=True)
    subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d",
                    str(download), IRONICCLIENT_TESTS_SDIST], check=True)
    archive = next(download.glob("python*ironicclient-*.tar.gz"))
    with tarfile.open(archive) as tar:
        members = [member for member in tar.getmembers() if "/ironicclient/tests/functional/" in member.name]
        tar.extractall(download, members=members, filter="data")
    source = next(download.glob("python*ironicclient-*/ironicclient/tests/functional"))
    shutil.copytree(source, target)
    for path in target.rglob("*.py"):
        text = path.read_text()
        path.write_text(text.replace("ironicclient.tests.functional", "ironicclient_functional"))
    base = target / "base.py"
    text = base.read_text()
    # The suite's base class checks ``self.auth_ref.project_scoped``, which
    # nothing in the suite or in tempest sets; every test would stop there.
    # The credentials the runner configures are project-scoped (or none).
    patched = text.replace("if not self.auth_ref.project_scoped:", "if False:  # auth_ref is never set")
    if patched == text:
        raise RuntimeError("ironicclient's functional base class changed; check the auth_ref work-around")
    base.write_text(patched)
    return target


def run_osc_suite(python: Path, workdir: Path, select: str | None, url: str | None = None) -> dict[str, str]:
    tests = fetch_osc_tests(python, workdir)
    corral = None if url else Corral(workdir / "corral", "noauth").start()
    try:
        endpoint = url or f"{corral.url}/baremetal"
        config = workdir / "test.conf"
        config.write_text(f"[functional]\nauth_strategy = noauth\nironic_url = {endpoint}\n")
        # The suite runs the CLI from ``./.tox/$OS_TESTENV_NAME/bin``.
        tox = workdir / ".tox"
        tox.mkdir(exist_ok=True)
        link = tox / "functional"
        if not link.exists():
            link.symlink_to(python.parent.parent)
        env = clean_env({"IRONICCLIENT_TEST_CONFIG": str(config), "OS_TESTENV_NAME": "functional"})
        args = [str(tests / "osc")]
        if select:
            args += ["-k", select]
        return run_pytest(python, args, workdir, env, workdir / "osc.xml", workdir / "osc.log")
    finally:
        if corral is not None:
            corral.stop()


def report(name: str, results: dict[str, str]) -> tuple[int, int]:
    passed = sum(1 for outcome in results.values() if outcome == "passed")
    failed = {test: outcome for test, outcome in results.items() if outcome.startswith("failed")}
    skipped = {test: outcome for test, outcome in results.items() if outcome.startswith("skipped")}
    print(f"\n== {name}")
    for test, outcome in sorted(failed.items()):
        reason = next((why for part, why in EXPECTED.items() if part in test), None)
        print(f"FAIL {test}: {outcome}" + (f"\n     known: {reason}" if reason else ""))
    for test, outcome in sorted(skipped.items()):
        print(f"SKIP {test}: {outcome}")
    print(f"{name}: {passed} passed, {len(failed)} failed" + (f", {len(skipped)} skipped" if skipped else ""))
    return passed, len(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("sdk", "osc", "image", "all"), default="all")
    parser.add_argument("--sdk-venv", type=Path, default=DEFAULT_SDK_VENV,
                        help="virtual environment for openstacksdk and its suite (created when missing)")
    parser.add_argument("--osc-venv", type=Path, default=DEFAULT_OSC_VENV,
                        help="virtual environment for python-ironicclient 5.8.0 and its suite (created when missing)")
    parser.add_argument("--workdir", type=Path, help="keep logs, reports and databases here")
    parser.add_argument("-k", dest="select", help="pytest -k expression")
    parser.add_argument("--osc-url", help="run the OSC suite against this Bare Metal endpoint (with noauth) "
                                          "instead of a fresh Corral, to compare with upstream Ironic")
    args = parser.parse_args()
    # A terminated run still stops the Corral it started (the ``finally`` blocks).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="corral-client-suites-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"logs and reports in {workdir}")
    totals = [0, 0]
    suites = ("sdk", "osc", "image") if args.suite == "all" else (args.suite,)
    for suite in suites:
        suite_dir = workdir / suite
        if suite_dir.exists():
            shutil.rmtree(suite_dir)
        suite_dir.mkdir()
        if suite == "sdk":
            results = run_sdk_suite(ensure_venv(args.sdk_venv, SDK_PACKAGES), suite_dir, args.select)
        elif suite == "image":
            results = run_image_suites(ensure_venv(args.sdk_venv, SDK_PACKAGES + IMAGE_SUITE_PACKAGES),
                                       suite_dir, args.select)
        else:
            results = run_osc_suite(ensure_venv(args.osc_venv, OSC_PACKAGES), suite_dir, args.select,
                                    args.osc_url)
        title = {"sdk": "openstacksdk baremetal functional", "osc": "python-ironicclient OSC functional",
                 "image": "openstacksdk and python-openstackclient image functional"}[suite]
        passed, failed = report(title, results)
        totals[0] += passed
        totals[1] += failed
    print(f"\n{totals[0]} passed, {totals[1]} failed")
    return 0 if totals[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
