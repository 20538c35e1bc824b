"""``corral identity ...``: bootstrap, users, projects, roles and token keys, straight on the database.

Like ``keystone-manage``, these commands need the configuration and the
database, not a token.  A password that is not given is generated and
printed once, on this terminal only.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import click
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.cli import conf_options, load_conf


def _context(config_files: Sequence[str], data_dir: str | None) -> tuple[Any, Any, Any]:
    from corral.core.db import database_from_conf
    from corral.identity import conf as identity_conf
    from corral.identity.domain.passwords import PasswordHasher

    conf = load_conf(config_files, data_dir)
    db = database_from_conf(conf, identity_conf.database_url(conf), "identity_database")
    identity = conf.identity
    hasher = PasswordHasher(identity.password_hash_algorithm, identity.password_hash_rounds, 1)
    return conf, db, hasher


def _run(db: Any, work: Any, *args: Any) -> Any:
    try:
        return db.write(work, *args)
    except sa.exc.IntegrityError as error:
        raise click.ClickException(f"already exists: {error.orig}") from None
    except sa.exc.SQLAlchemyError as error:
        raise click.ClickException(f"database error ({error.__class__.__name__}); "
                                   "is it migrated? run 'corral db upgrade'") from None
    finally:
        db.dispose()


def _lifetime(conf: Any) -> int:
    return int(conf.token.expiration + conf.token.allow_expired_window)


@click.group(name="identity")
def cli() -> None:
    """Identity: the administrator, users, projects, roles and token keys."""


@cli.command("bootstrap")
@click.option("--username", default="admin", show_default=True)
@click.option("--password", envvar="CORRAL_BOOTSTRAP_PASSWORD",
              help="The admin's password (also from CORRAL_BOOTSTRAP_PASSWORD); generated and printed when absent "
                   "and the user is new.")
@click.option("--project-name", default="admin", show_default=True)
@click.option("--role-name", default="admin", show_default=True)
@click.option("--clouds-yaml", type=click.Path(dir_okay=False),
              help="Also write a clouds.yaml entry (mode 0600) for this user here.")
@click.option("--auth-url", default="http://127.0.0.1:6385/identity", show_default=True,
              help="The identity URL written into --clouds-yaml.")
@conf_options
def bootstrap_command(username: str, password: str | None, project_name: str, role_name: str,
                      clouds_yaml: str | None, auth_url: str, config_files: Sequence[str], data_dir: str | None) -> None:
    """Create (or complete) the default domain, roles, an admin project and user, as keystone-manage bootstrap."""
    from corral.identity import bootstrap as setup
    from corral.identity import conf as identity_conf
    from corral.identity import keys

    conf, db, hasher = _context(config_files, data_dir)
    keys.setup(identity_conf.key_repository(conf))
    generated = None
    try:
        with db.read() as conn:
            from corral.identity.db import resources

            exists = resources.get_user_by_name(conn, username, conf.identity.default_domain_id) is not None
    except sa.exc.SQLAlchemyError as error:
        db.dispose()
        raise click.ClickException(f"database error ({error.__class__.__name__}); run 'corral db upgrade'") from None
    if password is None and not exists:
        password = generated = secrets.token_urlsafe(18)
    try:
        result = setup.bootstrap(db, hasher, username=username, password=password, project_name=project_name,
                                 role_name=role_name, domain_id=conf.identity.default_domain_id)
    except sa.exc.SQLAlchemyError as error:
        raise click.ClickException(f"database error ({error.__class__.__name__}); run 'corral db upgrade'") from None
    finally:
        db.dispose()
    click.echo(f"user {username} ({result.user_id}) has role {role_name} on project {project_name} "
               f"({result.project_id}) and on the system")
    if clouds_yaml and password is not None:
        setup.write_private(clouds_yaml, setup.clouds_yaml(auth_url, username, password, project_name,
                                                           conf.catalog.region_id))
        click.echo(f"clouds.yaml entry '{setup.CLOUD_NAME}' written to {clouds_yaml}")
    elif generated is not None:
        click.echo(f"password: {generated}")


@cli.command("fernet-setup")
@conf_options
def fernet_setup(config_files: Sequence[str], data_dir: str | None) -> None:
    """Create the token key repository (a staged and a primary key) if it has no keys."""
    from corral.identity import conf as identity_conf
    from corral.identity import keys

    conf = load_conf(config_files, data_dir)
    path = identity_conf.key_repository(conf)
    click.echo(f"keys created in {path}" if keys.setup(path) else f"{path} already has keys")


@cli.command("fernet-rotate")
@conf_options
def fernet_rotate(config_files: Sequence[str], data_dir: str | None) -> None:
    """Promote the staged key, stage a new one, drop the oldest beyond [fernet_tokens] max_active_keys."""
    from corral.identity import conf as identity_conf
    from corral.identity import keys

    conf = load_conf(config_files, data_dir)
    path = identity_conf.key_repository(conf)
    try:
        primary = keys.rotate(path, conf.fernet_tokens.max_active_keys)
    except keys.KeyRepositoryError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"key {primary} is now the primary key in {path}; copy the directory to every host")


# ----------------------------------------------------------------- users


@cli.group("user")
def user_group() -> None:
    """Users."""


def _domain(conn: Connection, conf: Any) -> str:
    from corral.identity.db import resources

    domain_id = conf.identity.default_domain_id
    if resources.get_domain(conn, domain_id) is None:
        raise click.ClickException(f"domain {domain_id} does not exist: run 'corral identity bootstrap' first")
    return str(domain_id)


@user_group.command("create")
@click.argument("name")
@click.option("--password", help="Generated and printed when absent.")
@click.option("--project", "project_name", help="Default project (by name).")
@click.option("--email")
@conf_options
def user_create(name: str, password: str | None, project_name: str | None, email: str | None,
                config_files: Sequence[str], data_dir: str | None) -> None:
    """Create a user in the default domain."""
    from corral.identity.db import resources

    conf, db, hasher = _context(config_files, data_dir)
    generated = None
    if password is None:
        password = generated = secrets.token_urlsafe(18)
    password_hash = hasher.hash(password)

    def work(conn: Connection) -> str:
        import uuid

        domain_id = _domain(conn, conf)
        project_id = None
        if project_name is not None:
            project = resources.get_project_by_name(conn, project_name, domain_id)
            if project is None:
                raise click.ClickException(f"no project named {project_name}")
            project_id = project["id"]
        user_id = uuid.uuid4().hex
        resources.insert_user(conn, {
            "id": user_id, "name": name, "domain_id": domain_id, "enabled": True, "default_project_id": project_id,
            "password_hash": password_hash, "password_created_at": resources.now(),
            "extra": {"email": email} if email else {},
        })
        return user_id

    user_id = _run(db, work)
    click.echo(f"user {name} created: {user_id}")
    if generated is not None:
        click.echo(f"password: {generated}")


@user_group.command("password-reset")
@click.argument("name")
@click.option("--password", help="Generated and printed when absent.")
@conf_options
def user_password_reset(name: str, password: str | None, config_files: Sequence[str], data_dir: str | None) -> None:
    """Set a user's password; the user's existing tokens are revoked."""
    from corral.identity.db import resources, revocations
    from corral.identity.domain import revocation as kinds

    conf, db, hasher = _context(config_files, data_dir)
    generated = None
    if password is None:
        password = generated = secrets.token_urlsafe(18)
    password_hash = hasher.hash(password)

    def work(conn: Connection) -> None:
        user = resources.get_user_by_name(conn, name, _domain(conn, conf))
        if user is None:
            raise click.ClickException(f"no user named {name}")
        resources.update_user(conn, user["id"], {"password_hash": password_hash,
                                                 "password_created_at": resources.now()})
        revocations.record(conn, [(kinds.USER, user["id"], None)], _lifetime(conf))

    _run(db, work)
    click.echo(f"password of {name} set; its tokens are revoked")
    if generated is not None:
        click.echo(f"password: {generated}")


# -------------------------------------------------------------- projects


@cli.group("project")
def project_group() -> None:
    """Projects."""


@project_group.command("create")
@click.argument("name")
@click.option("--description", default="")
@conf_options
def project_create(name: str, description: str, config_files: Sequence[str], data_dir: str | None) -> None:
    """Create a project in the default domain."""
    import uuid

    from corral.identity.db import resources

    conf, db, _hasher = _context(config_files, data_dir)
    project_id = uuid.uuid4().hex

    def work(conn: Connection) -> None:
        resources.insert_project(conn, {"id": project_id, "name": name, "domain_id": _domain(conn, conf),
                                        "description": description, "enabled": True, "tags": [], "extra": {}})

    _run(db, work)
    click.echo(f"project {name} created: {project_id}")


# ----------------------------------------------------------------- roles


@cli.group("role")
def role_group() -> None:
    """Role assignments."""


def _assignment_parts(conn: Connection, conf: Any, user: str, role: str, project: str | None,
                      system: bool) -> tuple[str, str, str, str]:
    from corral.identity.db import resources
    from corral.identity.db import roles as role_db

    if (project is None) == (not system):
        raise click.ClickException("give exactly one of --project NAME or --system")
    domain_id = _domain(conn, conf)
    user_row = resources.get_user_by_name(conn, user, domain_id)
    role_row = role_db.get_role_by_name(conn, role)
    if user_row is None or role_row is None:
        raise click.ClickException(f"no {'user ' + user if user_row is None else 'role ' + role}")
    if system:
        return role_db.SYSTEM, role_db.SYSTEM_ID, user_row["id"], role_row["id"]
    project_row = resources.get_project_by_name(conn, project or "", domain_id)
    if project_row is None:
        raise click.ClickException(f"no project {project}")
    return role_db.PROJECT, project_row["id"], user_row["id"], role_row["id"]


@role_group.command("add")
@click.argument("role")
@click.option("--user", required=True, help="User name.")
@click.option("--project", help="Project name.")
@click.option("--system", is_flag=True, help="On the system instead of a project.")
@conf_options
def role_add(role: str, user: str, project: str | None, system: bool, config_files: Sequence[str],
             data_dir: str | None) -> None:
    """Give a user a role on a project or on the system."""
    from corral.identity.db import roles as role_db

    conf, db, _hasher = _context(config_files, data_dir)
    _run(db, lambda conn: role_db.add_assignment(conn, *_assignment_parts(conn, conf, user, role, project, system)))
    click.echo(f"{user} has role {role} on {'the system' if system else 'project ' + str(project)}")


@role_group.command("remove")
@click.argument("role")
@click.option("--user", required=True, help="User name.")
@click.option("--project", help="Project name.")
@click.option("--system", is_flag=True, help="On the system instead of a project.")
@conf_options
def role_remove(role: str, user: str, project: str | None, system: bool, config_files: Sequence[str],
                data_dir: str | None) -> None:
    """Take a role away; the user's tokens on that project (or the system) are revoked."""
    from corral.identity.db import revocations
    from corral.identity.db import roles as role_db
    from corral.identity.domain import revocation as kinds

    conf, db, _hasher = _context(config_files, data_dir)

    def work(conn: Connection) -> None:
        target_type, target_id, user_id, role_id = _assignment_parts(conn, conf, user, role, project, system)
        if not role_db.delete_assignment(conn, target_type, target_id, user_id, role_id):
            raise click.ClickException(f"{user} does not have role {role} there")
        revocations.record(conn, [(kinds.GRANT, user_id, target_id)], _lifetime(conf))

    _run(db, work)
    click.echo(f"role {role} removed from {user}")
