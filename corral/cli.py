"""The ``corral`` command."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import click
import sqlalchemy as sa
from oslo_config import cfg

from corral.core import config, migrations, services, startup, supervise

# Roles a process can take.  "all" serves every API and runs every
# background worker; "api" only serves; the others run one service's
# background work ("background" runs all of it).
ROLES = ("all", "api", "background", "conductor", "compute")


def conf_options(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option(
        "--config-file",
        "config_files",
        multiple=True,
        type=click.Path(dir_okay=False),
        envvar="CORRAL_CONFIG_FILE",
        help="INI configuration file (repeatable; later files win).",
    )(function)
    function = click.option(
        "--data-dir",
        type=click.Path(file_okay=False),
        envvar="CORRAL_DATA_DIR",
        help="Directory for local state and the embedded SQLite databases.",
    )(function)
    return function


def load_conf(config_files: Sequence[str], data_dir: str | None) -> cfg.ConfigOpts:
    try:
        conf = config.make_conf(config_files, state_path=data_dir)
        startup.check_values(conf)
    except (FileNotFoundError, cfg.Error) as error:
        raise click.ClickException(str(error)) from error
    except startup.StartupError as error:
        raise click.ClickException(str(error)) from None
    return conf


def setup_logging(conf: cfg.ConfigOpts) -> None:
    logging.basicConfig(
        level=logging.DEBUG if conf.debug else logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
    )
    # Alembic narrates every revision at INFO; at start-up that buries the one
    # line that matters when something is wrong.
    logging.getLogger("alembic").setLevel(logging.DEBUG if conf.debug else logging.WARNING)


class CorralGroup(click.Group):
    """Adds each service's own command group lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        extra = [module.NAME for module in services.load() if getattr(module, "cli", None)]
        return sorted(set(super().list_commands(ctx)) | set(extra))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None or name not in services.names():
            return command
        (module,) = services.load([name])
        return getattr(module, "cli", None)


@click.group(cls=CorralGroup)
@click.version_option(package_name="corral", prog_name="corral", message="%(prog)s %(version)s")
def main() -> None:
    """Corral: Placement, Bare Metal and Compute with OpenStack's wire format."""


# ----------------------------------------------------------------- db


@main.group()
def db() -> None:
    """Database schema migrations."""


def _targets(conf: cfg.ConfigOpts) -> list[tuple[migrations.MigrationTree, str]]:
    targets = []
    for module in services.load():
        targets.extend(module.migration_targets(conf))
    return targets


def upgrade_all(conf: cfg.ConfigOpts, only_sqlite: bool = False) -> None:
    from corral.core.db import create_engine

    for tree, url in _targets(conf):
        if only_sqlite and not url.startswith("sqlite"):
            continue
        engine = create_engine(url)
        try:
            migrations.upgrade(engine, tree)
        finally:
            engine.dispose()


@db.command("upgrade")
@conf_options
def db_upgrade(config_files: Sequence[str], data_dir: str | None) -> None:
    """Create or upgrade every database to the latest schema."""
    conf = load_conf(config_files, data_dir)
    try:
        upgrade_all(conf)
    except sa.exc.SQLAlchemyError as error:
        raise click.ClickException(f"database upgrade failed: {error}") from error
    click.echo("All databases are up to date.")


@db.command("check")
@conf_options
def db_check(config_files: Sequence[str], data_dir: str | None) -> None:
    """Exit non-zero unless every database is at the latest schema."""
    from corral.core.db import create_engine

    conf = load_conf(config_files, data_dir)
    problems: list[str] = []
    for tree, url in _targets(conf):
        engine = create_engine(url)
        try:
            problems.extend(migrations.check(engine, tree))
        except sa.exc.SQLAlchemyError as error:
            problems.append(f"{tree.name}: cannot check: {error}")
        finally:
            engine.dispose()
    for problem in problems:
        click.echo(problem, err=True)
    if problems:
        sys.exit(1)
    click.echo("All databases are up to date.")


# -------------------------------------------------------------- serve


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    started: list[Any] = []
    for module in services.load():
        started.extend(module.start_background(conf, role))
    return started


def _announce(conf: cfg.ConfigOpts, host: str, port: int) -> None:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    for module in services.load():
        click.echo(f"{module.NAME:>10}: http://{shown}:{port}{module.PREFIX}")
    click.echo(f"state in {conf.state_path}", err=True)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=6385, show_default=True, type=int, help="Port to listen on.")
@click.option("--role", type=click.Choice(ROLES), default="all", show_default=True)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256), help="API worker processes.")
@click.option("--threads", default=16, show_default=True, type=click.IntRange(1, 1024), help="Threads per API worker.")
@click.option(
    "--migrate/--no-migrate",
    default=None,
    help="Upgrade databases before starting (default: only embedded SQLite ones).",
)
# The background process of `serve --workers N` writes its metrics where its
# parent's listener reads them, and listens for nothing itself.
@click.option("--metrics-dir", hidden=True, type=click.Path(file_okay=False))
@conf_options
def serve(
    host: str,
    port: int,
    role: str,
    workers: int,
    threads: int,
    migrate: bool | None,
    metrics_dir: str | None,
    config_files: Sequence[str],
    data_dir: str | None,
) -> None:
    """Run the services: APIs on one port and background workers."""
    conf = load_conf(config_files, data_dir)
    _check_serve(conf, host, port, role, metrics_listener=metrics_dir is None)
    setup_logging(conf)
    _default_local_port(conf, port)
    if migrate is not False:
        try:
            upgrade_all(conf, only_sqlite=migrate is None)
        except sa.exc.SQLAlchemyError as error:
            raise click.ClickException(f"database upgrade failed: {_first_line(error)}") from None
    from corral.core import metrics

    listener = None
    if metrics_dir is None and startup.metrics_address(conf) is not None:
        metrics_dir, listener = _metrics_listener(conf)
    try:
        if role not in ("all", "api"):
            if metrics_dir is not None:
                metrics.enable(metrics_dir, role)
            _run_background_only(conf, role)
            return
        _serve_apis(conf, host, port, role, workers, threads, config_files, data_dir, metrics_dir)
    finally:
        if listener is not None:
            listener.stop()


def _metrics_listener(conf: cfg.ConfigOpts) -> tuple[str, Any]:
    """The directory every process of this server writes its metrics to (emptied), and the listener reading it."""
    from corral.core import metrics
    from corral.core.auth import HtpasswdAuthenticator
    from corral.core.server import ThreadedServer

    address = startup.metrics_address(conf)
    assert address is not None
    host, port = address
    directory = metrics.prepare_directory(os.path.join(conf.state_path, "metrics", str(port)))
    user_file = conf.metrics.http_basic_auth_user_file
    authenticate = HtpasswdAuthenticator(user_file).check if user_file else None
    listener = ThreadedServer(metrics.exporter(directory, authenticate), host=host, port=port).start()
    click.echo(f"   metrics: {listener.url}/metrics", err=True)
    return directory, listener


def _serve_apis(conf: cfg.ConfigOpts, host: str, port: int, role: str, workers: int, threads: int,
                config_files: Sequence[str], data_dir: str | None, metrics_dir: str | None) -> None:
    from corral.core import metrics, server, wsgi

    _prepare(conf, host, port)
    helper = None
    if role == "all" and workers > 1:
        # Background work must run exactly once: in its own process, kept
        # running; if it keeps dying the whole server stops with an error.
        helper = supervise.Supervised(
            "background process",
            [sys.executable, "-m", "corral", "serve", "--role", "background", "--no-migrate", "--port", str(port)]
            + [arg for path in config_files for arg in ("--config-file", path)]
            + (["--data-dir", data_dir] if data_dir else [])
            + (["--metrics-dir", metrics_dir] if metrics_dir else []),
            on_give_up=lambda: os.kill(os.getpid(), signal.SIGTERM),
            on_exit=(lambda pid: metrics.process_died(metrics_dir, pid)) if metrics_dir else None,
        ).start()

    in_worker = role == "all" and workers == 1
    worker_role = "all" if in_worker else "api"
    status: Any = 0
    try:
        server.run_gunicorn(
            lambda: wsgi.all_in_one(conf),
            bind=f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            workers=workers,
            threads=threads,
            limits=_limits(conf),
            on_worker_start=(lambda: start_background(conf, "all")) if in_worker else None,
            on_ready=lambda: _announce(conf, host, port),
            # Each worker counts into files of its own, from the moment it forked.
            on_fork=(lambda: metrics.enable(metrics_dir, worker_role)) if metrics_dir else None,
            on_worker_exit=(lambda pid: metrics.process_died(metrics_dir, pid)) if metrics_dir else None,
        )
    except SystemExit as exit_:
        status = exit_.code
    finally:
        if helper is not None:
            helper.stop()
    if helper is not None and helper.failed:
        raise click.ClickException("the background process kept dying, so the server stopped (see the log above)")
    if status:
        sys.exit(status)


def _check_serve(conf: cfg.ConfigOpts, host: str, port: int, role: str, *, metrics_listener: bool = True) -> None:
    """Everything that can be checked before migrating or listening."""
    try:
        startup.check_port(port)
        startup.check_metrics(conf, listen=metrics_listener, api_port=port if role in ("all", "api") else None)
        startup.check_data_dir(conf.state_path)
        startup.check_database_urls((tree.name, url) for tree, url in _targets(conf))
        for module in services.load():
            check = getattr(module, "check_startup", None)
            if check is not None:
                check(conf, role)
        if role in ("all", "api"):
            startup.check_auth_exposure(conf, host)
            startup.check_auth_files(conf)
            startup.check_listen(host, port)
    except startup.StartupError as error:
        raise click.ClickException(str(error)) from None


def _first_line(error: sa.exc.SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's statement and help link."""
    text = str(getattr(error, "orig", None) or error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _limits(conf: cfg.ConfigOpts) -> Any:
    from corral.core.front import Limits

    group = conf.corral_server
    return Limits(
        header_timeout=group.header_timeout,
        body_timeout=group.body_timeout,
        keepalive=group.keepalive_timeout,
        send_timeout=group.send_timeout,
        max_connections=group.max_connections,
        max_body_size=conf.api.max_request_body_size,
        max_streamed=group.max_streamed_requests,
    )


def _prepare(conf: cfg.ConfigOpts, host: str, port: int) -> None:
    """Each service's work before serving (the identity service's first start)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    url = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"
    for module in services.load():
        prepare = getattr(module, "prepare", None)
        if prepare is not None:
            try:
                lines = prepare(conf, url)
            except services.StartupError as error:
                raise click.ClickException(str(error)) from None
            for line in lines:
                click.echo(line, err=True)


def _default_local_port(conf: cfg.ConfigOpts, port: int) -> None:
    """Services that call this server's own APIs (Compute calls Placement and Image) find it on ``port``."""
    for group in ("placement", "glance"):
        try:
            conf.set_default("local_port", port, group=group)
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            pass


def _run_background_only(conf: cfg.ConfigOpts, role: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = start_background(conf, role)
    click.echo(f"running {role} background work ({len(started)} workers) as {conf.host}", err=True)
    stop.wait()
    for item in reversed(started):
        item.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
