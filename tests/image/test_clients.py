"""Real clients against ``corral serve``'s Image service, on every database backend.

The ``openstack`` CLI and openstacksdk find the service through the
catalog of Corral's own identity service, with nothing but the
clouds.yaml the first start wrote (and one for a second user).
python-glanceclient runs as the ``glance`` command.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore::PendingDeprecationWarning:openstack\..*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"),
]

DATA = bytes(range(256)) * 4096  # 1 MiB: more than any buffered request body


class _Files(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


class Cloud:
    def __init__(self, process: CorralProcess, data_dir: Path, web_url: str) -> None:
        self.process = process
        self.data_dir = data_dir
        self.web_url = web_url
        self.clouds_yaml = data_dir / "clouds.yaml"

    def osc(self, *args: str, cloud: str = "corral", parse: bool = True) -> Any:
        """``openstack *args`` as ``cloud``, in a child process (the client keeps identities and
        endpoints it has seen for the life of its process)."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
        env.update(OS_CLIENT_CONFIG_FILE=str(self.clouds_yaml), OS_CLOUD=cloud)
        argv = [*args, *(["-f", "json"] if parse else [])]
        child = subprocess.run([sys.executable, "-m", "openstackclient.shell", *argv], capture_output=True,
                               text=True, timeout=120, env=env)
        assert child.returncode == 0, f"openstack {' '.join(args)} failed:\n{child.stderr}"
        return json.loads(child.stdout) if parse and child.stdout.strip() else child.stdout

    def add_user(self, name: str, project: str) -> None:
        """A member of ``project``, with a clouds.yaml entry of its own."""
        self.osc("project", "create", project)
        self.osc("user", "create", "--password", f"{name}-password", "--project", project, name)
        self.osc("role", "add", "--user", name, "--project", project, "member", parse=False)
        config = yaml.safe_load(self.clouds_yaml.read_text())
        entry = json.loads(json.dumps(config["clouds"]["corral"]))
        entry["auth"].update(username=name, password=f"{name}-password", project_name=project)
        config["clouds"][name] = entry
        self.clouds_yaml.write_text(yaml.safe_dump(config))

    def glance(self, *args: str) -> str:
        entry = yaml.safe_load(self.clouds_yaml.read_text())["clouds"]["corral"]["auth"]
        env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
        env.update(OS_AUTH_URL=entry["auth_url"] + "/v3", OS_USERNAME=entry["username"],
                   OS_PASSWORD=entry["password"], OS_PROJECT_NAME=entry["project_name"],
                   OS_USER_DOMAIN_NAME="Default", OS_PROJECT_DOMAIN_NAME="Default", OS_IMAGE_API_VERSION="2")
        command = [sys.executable, "-c", "import sys; from glanceclient.shell import main; sys.exit(main())", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, f"glance {' '.join(args)} failed:\n{result.stderr}"
        return result.stdout

    def connect(self, monkeypatch: pytest.MonkeyPatch, cloud: str = "corral") -> Any:
        import openstack

        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(self.clouds_yaml))
        return openstack.connect(cloud=cloud)


@pytest.fixture(scope="module")
def cloud(backend: str, database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    base = tmp_path_factory.mktemp("image-clients")
    data_dir = base / "state"
    data_dir.mkdir()
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Files", (_Files,), {"body": DATA}))
    threading.Thread(target=web.serve_forever, daemon=True).start()
    web_port = web.server_address[1]
    port = free_port()
    config = write_config(base / "corral.conf", {
        "image_database": {"connection": database_factory.new_url("image")},
        "import_filtering_opts": {"allowed_hosts": "127.0.0.1", "allowed_ports": str(web_port)},
    })
    process = CorralProcess(config, data_dir, port=port, extra_args=["--migrate"]).start(wait_path="/identity/v3")
    try:
        yield Cloud(process, data_dir, f"http://127.0.0.1:{web_port}/image.raw")
    finally:
        process.stop()
        web.shutdown()
        web.server_close()


def test_openstack_cli_image_lifecycle(cloud: Cloud, tmp_path: Path) -> None:
    source = tmp_path / "cirros.raw"
    source.write_bytes(DATA)
    created = cloud.osc("image", "create", "--file", str(source), "--disk-format", "raw", "--container-format",
                        "bare", "--property", "os_distro=cirros", "cli-image")
    assert created["status"] == "active"
    assert created["checksum"] == hashlib.md5(DATA).hexdigest()
    assert [row["Name"] for row in cloud.osc("image", "list")] == ["cli-image"]
    cloud.osc("image", "set", "--property", "hw_disk_bus=scsi", "--tag", "blue", "--min-ram", "64", "cli-image",
              parse=False)
    shown = cloud.osc("image", "show", "cli-image")
    assert shown["properties"]["hw_disk_bus"] == "scsi" and shown["tags"] == ["blue"] and shown["min_ram"] == 64
    cloud.osc("image", "unset", "--tag", "blue", "--property", "hw_disk_bus", "cli-image", parse=False)
    shown = cloud.osc("image", "show", "cli-image")
    assert shown["tags"] == [] and "hw_disk_bus" not in shown["properties"]
    saved = tmp_path / "saved.raw"
    cloud.osc("image", "save", "--file", str(saved), "cli-image", parse=False)
    assert saved.read_bytes() == DATA
    cloud.osc("image", "delete", "cli-image", parse=False)
    assert cloud.osc("image", "list") == []


def test_sharing_with_another_project(cloud: Cloud, tmp_path: Path) -> None:
    source = tmp_path / "shared.raw"
    source.write_bytes(DATA[:4096])
    image = cloud.osc("image", "create", "--file", str(source), "--shared", "shared-image")
    cloud.add_user("bob", "bobs-project")
    cloud.osc("image", "add", "project", "shared-image", "bobs-project")
    assert cloud.osc("image", "list", cloud="bob") == []
    cloud.osc("image", "set", "--accept", image["id"], cloud="bob", parse=False)
    assert [row["Name"] for row in cloud.osc("image", "list", cloud="bob")] == ["shared-image"]
    members = cloud.osc("image", "member", "list", "shared-image")
    assert [(row["Status"]) for row in members] == ["accepted"]
    private = cloud.osc("image", "create", "--file", str(source), "--private", "private-image")
    listed = cloud.osc("image", "list", cloud="bob")
    assert private["id"] not in {row["ID"] for row in listed}


def test_glanceclient_create_and_download(cloud: Cloud, tmp_path: Path) -> None:
    source = tmp_path / "glance.raw"
    source.write_bytes(DATA)
    output = cloud.glance("image-create", "--file", str(source), "--disk-format", "raw", "--container-format",
                          "bare", "--name", "from-glanceclient", "--property", "color=green")
    image_id = next(line.split("|")[2].strip() for line in output.splitlines() if "| id " in line)
    target = tmp_path / "downloaded.raw"
    cloud.glance("image-download", "--file", str(target), image_id)
    assert target.read_bytes() == DATA
    assert "from-glanceclient" in cloud.glance("image-list")


def test_openstacksdk_image_proxy(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = cloud.connect(monkeypatch)
    try:
        image = conn.image.create_image(name="sdk-image", data=DATA, disk_format="raw", container_format="bare",
                                        wait=True, allow_duplicates=True)
        assert conn.image.get_image(image.id).status == "active"
        assert conn.image.download_image(image).content == DATA
        conn.image.update_image(image, name="sdk-renamed")
        assert [i.name for i in conn.image.images(name="sdk-renamed")] == ["sdk-renamed"]
        imported = conn.image.create_image(name="web-downloaded", disk_format="raw", container_format="bare",
                                           allow_duplicates=True)
        conn.image.import_image(imported, method="web-download", uri=cloud.web_url)
        deadline = time.monotonic() + 60
        while conn.image.get_image(imported.id).status != "active" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conn.image.get_image(imported.id).checksum == hashlib.md5(DATA).hexdigest()
        conn.image.delete_image(image)
        conn.image.delete_image(imported)
        assert not {"sdk-renamed", "web-downloaded"} & {i.name for i in conn.image.images()}
    finally:
        conn.close()


def test_openstack_cli_glance_direct_import(cloud: Cloud, tmp_path: Path) -> None:
    source = tmp_path / "direct.raw"
    source.write_bytes(DATA)
    cloud.osc("image", "create", "--import", "--file", str(source), "--disk-format", "raw", "--container-format",
              "bare", "imported-direct")
    deadline = time.monotonic() + 60
    while cloud.osc("image", "show", "imported-direct")["status"] != "active" and time.monotonic() < deadline:
        time.sleep(0.2)
    shown = cloud.osc("image", "show", "imported-direct")
    assert (shown["status"], shown["checksum"]) == ("active", hashlib.md5(DATA).hexdigest())
