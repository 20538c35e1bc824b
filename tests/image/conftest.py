"""The Image service over real HTTP on a real database, once per backend."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.core import config, migrations
from corral.core.db import create_engine, truncate_all
from corral.core.server import ThreadedServer
from corral.image.api.app import build_state, make_app
from corral.image.db.schema import TREE
from corral.image.db.tables import metadata
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

OCTET = {"Content-Type": "application/octet-stream"}
PATCH = {"Content-Type": "application/openstack-images-v2.1-json-patch"}


class ImageServer:
    def __init__(self, database_factory: DatabaseFactory, tmp_dir: Path, **groups: dict[str, Any]) -> None:
        self.url_db = database_factory.new_url("image")
        self.datadir = tmp_dir / "images"
        self.staging = tmp_dir / "staging"
        overrides: dict[str, dict[str, Any]] = {
            "image_database": {"connection": self.url_db},
            "api": {"auth_strategy": "noauth2"},
            "glance_store": {"filesystem_store_datadir": str(self.datadir)},
            "DEFAULT": {"node_staging_uri": f"file://{self.staging}"},
        }
        for group, values in groups.items():
            overrides.setdefault(group, {}).update(values)
        self.conf = config.make_conf(state_path=str(tmp_dir), overrides=overrides)
        engine = create_engine(self.url_db)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.state = build_state(self.conf)
        self.app = make_app(self.conf, self.state)
        self.server = ThreadedServer(self.app).start()
        self.url = self.server.url

    def client(self, project: str = "demo", roles: str | None = "member,reader", user: str = "alice") -> ApiClient:
        headers = {"X-Auth-Token": f"{user}:{project}", "Accept": "application/json"}
        if roles is not None:
            headers["X-Roles"] = roles
        return ApiClient(self.url, headers)

    def admin(self, project: str = "admin") -> ApiClient:
        return self.client(project, "admin,member,reader", user="admin")

    def reset(self) -> None:
        self.state.imports.shutdown(wait=True)
        truncate_all(self.state.db, metadata)
        for directory in (self.datadir, self.staging):
            shutil.rmtree(directory, ignore_errors=True)
        self.datadir.mkdir()
        import futurist

        self.state.imports = futurist.ThreadPoolExecutor(max_workers=4)

    def stored_files(self) -> list[str]:
        return sorted(path.name for path in self.datadir.iterdir()) if self.datadir.exists() else []

    def staged_files(self) -> list[str]:
        return sorted(path.name for path in self.staging.iterdir()) if self.staging.exists() else []

    def stop(self) -> None:
        self.server.stop()
        self.state.imports.shutdown(wait=True)
        self.state.db.dispose()


@pytest.fixture(scope="session")
def image_server(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageServer]:
    server = ImageServer(database_factory, tmp_path_factory.mktemp("image"))
    yield server
    server.stop()


@pytest.fixture
def image_api(image_server: ImageServer) -> Iterator[ImageServer]:
    image_server.reset()
    yield image_server


def create(client: ApiClient, **body: Any) -> dict[str, Any]:
    body.setdefault("disk_format", "raw")
    body.setdefault("container_format", "bare")
    response = client.post("/v2/images", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def upload(client: ApiClient, image_id: str, data: bytes, **headers: str) -> Any:
    return client.put(f"/v2/images/{image_id}/file", data=data, headers={**OCTET, **headers})


def active(client: ApiClient, data: bytes = b"\0" * 4096, **body: Any) -> dict[str, Any]:
    image = create(client, **body)
    response = upload(client, image["id"], data)
    assert response.status_code == 204, response.text
    return client.get(f"/v2/images/{image['id']}").json()  # type: ignore[no-any-return]
