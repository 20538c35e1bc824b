"""Bare Metal checks made before ``corral serve`` starts (see corral.core.startup)."""

from __future__ import annotations

import os

from oslo_config import cfg

from corral.core.startup import StartupError, is_loopback

# Roles whose conductor serves JSON-RPC (the all-in-one server calls its conductor in-process).
JSON_RPC_SERVER_ROLES = ("background", "conductor")
# Roles whose API calls conductors over JSON-RPC.
JSON_RPC_CLIENT_ROLES = ("api", "all")


def check_json_rpc(conf: cfg.ConfigOpts, role: str) -> None:
    group = conf.json_rpc
    basic = group.auth_strategy == "http_basic"
    if role in JSON_RPC_SERVER_ROLES:
        if not basic and not is_loopback(group.host_ip):
            raise StartupError(
                f"refusing to serve JSON-RPC without authentication on {group.host_ip}, which is not a loopback "
                "address: anyone reaching it could change any node. Set [json_rpc] auth_strategy = http_basic "
                "(with http_basic_auth_user_file) or host_ip = 127.0.0.1"
            )
        if basic and not os.access(group.http_basic_auth_user_file, os.R_OK):
            raise StartupError(f"[json_rpc] auth_strategy = http_basic needs a readable user file; "
                               f"{group.http_basic_auth_user_file} cannot be read")
        if group.use_ssl:
            for option in ("cert_file", "key_file"):
                path = conf.ssl[option]
                if not path or not os.access(path, os.R_OK):
                    raise StartupError(f"[json_rpc] use_ssl needs a readable [ssl] {option}"
                                       + (f"; {path} cannot be read" if path else ""))
    if role in JSON_RPC_CLIENT_ROLES and basic and not group.http_basic_username:
        raise StartupError("[json_rpc] auth_strategy = http_basic needs http_basic_username and "
                           "http_basic_password for the calls this process makes")
