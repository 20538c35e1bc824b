"""Creating the first administrator, as ``keystone-manage bootstrap`` does, and a clouds.yaml for it.

:func:`bootstrap` is idempotent: it creates what is missing (the default
domain, the ``admin``, ``member``, ``reader`` and ``service`` roles with
admin implying member implying reader, the admin project and user, the
user's admin role on the project and on the system, and the ``service``
project with the ``corral`` user that Corral's services use to call each
other) and, when given a password, sets it.

:func:`first_start` is what ``corral serve`` runs before serving: token
keys when there are none, and when the identity database has no domain
yet, a bootstrap with a random password written only to a clouds.yaml file
(mode 0600).
"""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import yaml
from oslo_config import cfg
from sqlalchemy.engine import Connection

from corral.core.config import DEFAULT_STATE_PATH
from corral.core.services import StartupError
from corral.core.db import Database, database_from_conf
from corral.identity import conf as identity_conf
from corral.identity import keys
from corral.identity.db import resources
from corral.identity.db import roles as role_db
from corral.identity.domain.passwords import PasswordHasher

ROLE_NAMES = ("admin", "member", "reader", "service")
IMPLICATIONS = (("admin", "member"), ("member", "reader"))
SERVICE_PROJECT = "service"
SERVICE_USER = "corral"
CLOUD_NAME = "corral"
# First line of a clouds.yaml that Corral wrote and may write again.
MARKER = "# Written by 'corral serve' for this Corral's admin; Corral rewrites it when it starts afresh."


@dataclass(frozen=True)
class BootstrapResult:
    user_id: str
    project_id: str
    created_user: bool


def _new_id() -> str:
    import uuid

    return uuid.uuid4().hex


def _ensure_role(conn: Connection, name: str) -> str:
    row = role_db.get_role_by_name(conn, name)
    if row is not None:
        return str(row["id"])
    role_id = _new_id()
    role_db.insert_role(conn, {"id": role_id, "name": name, "description": None, "options": {"immutable": True}})
    return role_id


def _ensure_project(conn: Connection, name: str, domain_id: str, description: str) -> str:
    row = resources.get_project_by_name(conn, name, domain_id)
    if row is not None:
        return str(row["id"])
    project_id = _new_id()
    resources.insert_project(conn, {"id": project_id, "name": name, "domain_id": domain_id,
                                    "description": description, "enabled": True, "tags": [], "extra": {}})
    return project_id


def _ensure_user(conn: Connection, name: str, domain_id: str, password_hash: str | None,
                 default_project_id: str | None) -> tuple[str, bool]:
    row = resources.get_user_by_name(conn, name, domain_id)
    if row is not None:
        if password_hash is not None:
            resources.update_user(conn, row["id"], {"password_hash": password_hash,
                                                    "password_created_at": resources.now(), "enabled": True})
        return str(row["id"]), False
    user_id = _new_id()
    resources.insert_user(conn, {
        "id": user_id, "name": name, "domain_id": domain_id, "enabled": True,
        "default_project_id": default_project_id, "password_hash": password_hash,
        "password_created_at": resources.now() if password_hash else None, "extra": {},
    })
    return user_id, True


def bootstrap(
    db: Database,
    hasher: PasswordHasher,
    *,
    username: str = "admin",
    password: str | None = None,
    project_name: str = "admin",
    role_name: str = "admin",
    domain_id: str = "default",
) -> BootstrapResult:
    password_hash = hasher.hash(password) if password is not None else None

    def work(conn: Connection) -> BootstrapResult:
        if resources.get_domain(conn, domain_id) is None:
            resources.insert_domain(conn, {"id": domain_id, "name": "Default" if domain_id == "default" else domain_id,
                                           "description": "The default domain", "enabled": True, "extra": {}})
        role_ids = {name: _ensure_role(conn, name) for name in (*ROLE_NAMES, role_name)}
        current = role_db.implications(conn)
        for prior, implied in IMPLICATIONS:
            if role_ids[implied] not in current.get(role_ids[prior], []):
                role_db.add_implication(conn, role_ids[prior], role_ids[implied])
        project_id = _ensure_project(conn, project_name, domain_id, "Bootstrap project for initializing the cloud.")
        user_id, created = _ensure_user(conn, username, domain_id, password_hash, project_id)
        role_db.add_assignment(conn, role_db.PROJECT, project_id, user_id, role_ids[role_name])
        role_db.add_assignment(conn, role_db.SYSTEM, role_db.SYSTEM_ID, user_id, role_ids[role_name])
        service_project = _ensure_project(conn, SERVICE_PROJECT, domain_id, "Corral's own services.")
        service_user, _ = _ensure_user(conn, SERVICE_USER, domain_id, None, service_project)
        for name in ("admin", "service"):
            role_db.add_assignment(conn, role_db.PROJECT, service_project, service_user, role_ids[name])
        return BootstrapResult(user_id, project_id, created)

    return db.write(work)


def service_identity(db: Database, domain_id: str = "default") -> tuple[str, str] | None:
    """(user id, project id) Corral's services act as, once bootstrapped."""
    with db.read() as conn:
        user = resources.get_user_by_name(conn, SERVICE_USER, domain_id)
        project = resources.get_project_by_name(conn, SERVICE_PROJECT, domain_id)
    if user is None or project is None:
        return None
    return user["id"], project["id"]


def is_bootstrapped(db: Database) -> bool:
    with db.read() as conn:
        return resources.count_domains(conn) > 0


# ------------------------------------------------------------ clouds.yaml


def clouds_yaml(auth_url: str, username: str, password: str, project_name: str, region: str) -> str:
    entry: dict[str, Any] = {
        "clouds": {
            CLOUD_NAME: {
                "auth": {
                    "auth_url": auth_url, "username": username, "password": password, "project_name": project_name,
                    "user_domain_name": "Default", "project_domain_name": "Default",
                },
                "region_name": region,
                "identity_api_version": 3,
            }
        }
    }
    return MARKER + "\n" + yaml.safe_dump(entry, default_flow_style=False, sort_keys=False)


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600), replacing it atomically."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".clouds-", suffix=".yaml")
    try:
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def user_clouds_yaml() -> str:
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(config_home, "openstack", "clouds.yaml")


def _ours(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == MARKER
    except OSError:
        return False


def _private_sqlite(url: str) -> None:
    """An embedded identity database holds password hashes: readable by its owner only.

    SQLite gives its journal files the database file's mode.
    """
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if os.path.exists(path):
            os.chmod(path, 0o600)


def first_start(conf: cfg.ConfigOpts, url: str) -> list[str]:
    """Keys when missing; on an empty identity database, the admin and a clouds.yaml. Lines to print.

    Keys are created only for a deployment that is new: a host joining an
    identity database already in use must get the keys the other hosts have
    (fresh ones would make it refuse their tokens and they its), so that is
    a start-up error.
    """
    lines: list[str] = []
    repository = identity_conf.key_repository(conf)
    _private_sqlite(identity_conf.database_url(conf))

    def new_keys() -> None:
        if keys.setup(repository):
            lines.append(f"token keys created in {repository}")

    if conf.api.auth_strategy != "corral":
        new_keys()
        return lines
    db = database_from_conf(conf, identity_conf.database_url(conf), "identity_database")
    try:
        try:
            in_use = is_bootstrapped(db)
        except sa.exc.SQLAlchemyError:
            new_keys()
            lines.append("the identity database is not ready: run 'corral db upgrade', then "
                         "'corral identity bootstrap' to create the admin")
            return lines
        if in_use and not keys.is_set_up(repository):
            raise StartupError(
                f"the identity database is in use but there are no token keys in {repository}: copy that "
                "directory from a host that has it (every host needs the same keys), or run 'corral identity "
                "fernet-setup' to start with new keys (tokens issued so far stop working)")
        new_keys()
        if in_use or not conf.identity.auto_bootstrap:
            return lines
        identity = conf.identity
        hasher = PasswordHasher(identity.password_hash_algorithm, identity.password_hash_rounds, 1)
        password = secrets.token_urlsafe(18)
        try:
            bootstrap(db, hasher, password=password, domain_id=identity.default_domain_id)
        except sa.exc.IntegrityError:
            # Another process starting on the same database got there first.
            lines.append("the admin user was created by another process")
            return lines
    finally:
        db.dispose()
    auth_url = conf.catalog.identity_url or (conf.catalog.public_url or conf.api.public_endpoint or url).rstrip(
        "/") + "/identity"
    text = clouds_yaml(auth_url, "admin", password, "admin", conf.catalog.region_id)
    path = identity_conf.clouds_yaml_path(conf)
    write_private(path, text)
    lines.append(f"admin user created; its credentials are in {path} (cloud '{CLOUD_NAME}')")
    home = user_clouds_yaml()
    if os.path.abspath(conf.state_path) == os.path.abspath(DEFAULT_STATE_PATH) and (
        not os.path.exists(home) or _ours(home)
    ):
        write_private(home, text)
        lines.append(f"also written to {home}: try 'openstack --os-cloud {CLOUD_NAME} token issue'")
    else:
        lines.append(f"use it with: export OS_CLIENT_CONFIG_FILE={path} OS_CLOUD={CLOUD_NAME}")
    return lines
