"""WSGI entry points for gunicorn, uWSGI and mod_wsgi.

Configuration comes from ``CORRAL_CONFIG_FILE`` (comma-separated paths) and
``CORRAL_DATA_DIR``.  Use the factories with gunicorn, for example
``gunicorn -w 4 'corral.wsgi:all_services()'`` or
``gunicorn -w 4 'corral.wsgi:placement()'``; ``application`` (the
all-in-one composite) is created on first access for servers that need a
module attribute.
"""

from __future__ import annotations

import os
from typing import Any

from corral.core import config
from corral.core import wsgi as core_wsgi


def _conf() -> Any:
    files = [path for path in os.environ.get("CORRAL_CONFIG_FILE", "").split(",") if path]
    return config.make_conf(files, state_path=os.environ.get("CORRAL_DATA_DIR"))


def all_services() -> Any:
    return core_wsgi.all_in_one(_conf())


def identity() -> Any:
    return core_wsgi.service_app(_conf(), "identity")


def placement() -> Any:
    return core_wsgi.service_app(_conf(), "placement")


def baremetal() -> Any:
    return core_wsgi.service_app(_conf(), "baremetal")


def compute() -> Any:
    return core_wsgi.service_app(_conf(), "compute")


def image() -> Any:
    return core_wsgi.service_app(_conf(), "image")


_APPLICATION: Any = None


def __getattr__(name: str) -> Any:
    global _APPLICATION
    if name != "application":
        raise AttributeError(name)
    if _APPLICATION is None:
        _APPLICATION = all_services()
    return _APPLICATION
