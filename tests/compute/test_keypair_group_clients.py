"""The ``openstack`` and ``nova`` command lines with key pairs, server groups, hypervisors, zones and usage.

Each command runs as a child process (in one process the CLI keeps
identities and endpoints between calls), against the compute test fixture:
two fake hosts, one in each cell, and the Image service the boots use.
Client behaviour does not depend on the database: first backend only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.compute.conftest import IMAGE, ComputeServer
from tests.compute.test_real_clients import identity_url  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.backends("first")]

USER_A = "user-a:project-a"
VERSION = "2.73"


def _environment(cloud: ComputeServer, identity: str, tmp_path: Path, token: str) -> dict[str, str]:
    clouds = tmp_path / f"clouds-{token.replace(':', '-')}.yaml"
    clouds.write_text(json.dumps({"clouds": {"corral": {
        "auth_type": "admin_token",
        "auth": {"endpoint": cloud.url + "/v2.1", "token": token},
        "identity_api_version": "3",
        "identity_endpoint_override": identity,
        "compute_endpoint_override": cloud.url + "/v2.1",
        "image_endpoint_override": cloud.images.url,
    }}}))
    env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)
    return env


def _openstack(cloud: ComputeServer, identity: str, tmp_path: Path, *args: str,
               token: str = USER_A) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "openstackclient.shell", "--os-cloud", "corral",
               "--os-compute-api-version", VERSION, *args, "-f", "json"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=_environment(cloud, identity, tmp_path, token))


def _osc(cloud: ComputeServer, identity: str, tmp_path: Path, *args: str, token: str = USER_A) -> Any:
    result = _openstack(cloud, identity, tmp_path, *args, token=token)
    assert result.returncode == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else None


def _nova(cloud: ComputeServer, *args: str, token: str = USER_A) -> str:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
    # keystoneauth's admin_token: the token and the endpoint, no identity service asked.
    command = [sys.executable, "-m", "novaclient.shell", "--os-auth-type", "admin_token", "--os-token", token,
               "--os-endpoint", cloud.url + "/v2.1", "--os-compute-api-version", VERSION, *args]
    # (read from the environment with this plugin, and never used: no identity service is asked)
    env.update(OS_PROJECT_ID=token.partition(":")[2], OS_AUTH_URL="http://127.0.0.1:9/identity/v3")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, f"nova {' '.join(args)} failed:\n{result.stderr}"
    return result.stdout


def _md5(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def test_keypairs_and_an_anti_affinity_group(cloud: ComputeServer, identity_url: str,  # noqa: F811
                                             tmp_path: Path) -> None:
    def osc(*args: str, token: str = USER_A) -> Any:
        return _osc(cloud, identity_url, tmp_path, *args, token=token)

    # A key the CLI generates (it keeps the private key) and one imported from a file.
    private_path = tmp_path / "k1"
    generated = osc("keypair", "create", "--private-key", str(private_path), "k1")
    private = serialization.load_ssh_private_key(private_path.read_bytes(), password=None)
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH).decode()
    assert generated["name"] == "k1" and generated["fingerprint"] == _md5(public)
    rsa_public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    (tmp_path / "k2.pub").write_text(rsa_public + " me@host\n")
    imported = osc("keypair", "create", "--public-key", str(tmp_path / "k2.pub"), "k2")
    assert imported["fingerprint"] == _md5(rsa_public)
    listed = osc("keypair", "list")
    assert {(row["Name"], row["Fingerprint"], row["Type"]) for row in listed} == {
        ("k1", _md5(public), "ssh"), ("k2", _md5(rsa_public), "ssh")}

    group = osc("server", "group", "create", "--policy", "anti-affinity", "grp")
    assert group["policy"] == "anti-affinity"
    hosts = []
    for name in ("vm1", "vm2"):
        created = osc("server", "create", "--image", IMAGE, "--flavor", "m1.tiny", "--nic", "none",
                      "--hint", f"group={group['id']}", "--key-name", "k1", name)
        assert created["key_name"] == "k1"
    cloud.run_computes()
    for name in ("vm1", "vm2"):
        shown = osc("server", "show", name, token="admin:project-a")
        assert shown["status"] == "ACTIVE" and shown["key_name"] == "k1"
        hosts.append(shown["OS-EXT-SRV-ATTR:host"])
    assert sorted(hosts) == ["host-cell1", "host-cell2"]
    # Only two hosts: a third member has nowhere to go.
    refused = _openstack(cloud, identity_url, tmp_path, "server", "create", "--image", IMAGE, "--flavor", "m1.tiny",
                         "--nic", "none", "--hint", f"group={group['id']}", "--key-name", "k1", "--wait", "vm3")
    assert refused.returncode != 0
    assert "Error creating server: vm3" in refused.stderr
    third = osc("server", "show", "vm3")
    assert third["status"] == "ERROR"
    assert third["fault"]["message"] == "No valid host was found. There are not enough hosts available."
    members = osc("server", "group", "show", "grp")["members"]
    assert len(members) == 3

    hypervisors = osc("hypervisor", "list", token="admin")
    assert sorted(row["Hypervisor Hostname"] for row in hypervisors) == ["host-cell1", "host-cell2"]
    zones = osc("availability", "zone", "list", "--compute")
    assert [(row["Zone Name"], row["Zone Status"]) for row in zones] == [("nova", "available")]
    usage = osc("usage", "list", "--start", "2000-01-01", token="admin")
    assert [row["Project"] for row in usage] == ["project-a"]
    assert usage[0]["RAM MB-Hours"] > 0 and usage[0]["CPU Hours"] > 0
    # The client asks for detailed=True, which upstream reads as not detailed ('1' only): no server count.
    assert usage[0]["Servers"] is None
    shown = osc("usage", "show", "--project", "project-a", "--start", "2000-01-01", token="admin")
    assert len(shown["Servers"]) == 2
    # The CLI names the limits as openstacksdk's attributes.
    limits = {row["Name"]: row["Value"] for row in osc("limits", "show", "--absolute")}
    assert limits["keypairs"] == 100
    assert (limits["server_groups"], limits["server_groups_used"], limits["server_group_members"]) == (10, 1, 10)
    assert limits["instances_used"] == 3


def test_novaclient_keypairs(cloud: ComputeServer) -> None:
    added = _nova(cloud, "keypair-add", "nk")
    assert added.startswith("-----BEGIN RSA PRIVATE KEY-----")
    listed = _nova(cloud, "keypair-list")
    assert "| nk " in listed and "| ssh " in listed
    shown = cloud.client(VERSION, token=USER_A).get("/v2.1/os-keypairs/nk").json()["keypair"]
    assert shown["fingerprint"] in listed
    _nova(cloud, "keypair-delete", "nk")
    assert "| nk " not in _nova(cloud, "keypair-list")
