"""How a service authenticates to another: keystoneauth's standalone ``auth_type`` values."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from corral.core import config
from corral.core.service_auth import ServiceCredentials


def test_none_and_http_basic_need_no_identity_service(tmp_path: Path) -> None:
    path = tmp_path / "corral.conf"
    path.write_text("[api]\nauth_strategy = noauth2\n"
                    "[ironic]\nauth_type = http_basic\nusername = nova\npassword = s3cr:et\n"
                    "[glance]\nauth_type = none\n"
                    "[placement]\ntoken = placement-token\n"
                    "[cinder]\nauth_type = http_basic\nusername = nova\n")
    conf = config.make_conf([str(path)], state_path=str(tmp_path), services=["compute"])
    basic = base64.b64encode(b"nova:s3cr:et").decode()
    assert ServiceCredentials(conf, "ironic").headers() == {"Authorization": f"Basic {basic}"}
    assert ServiceCredentials(conf, "glance").headers() == {}
    # Without an auth_type the strategy decides, as before.
    assert ServiceCredentials(conf, "placement").headers() == {"X-Auth-Token": "placement-token"}
    with pytest.raises(ValueError, match=r"\[cinder\] auth_type = http_basic needs username and password"):
        ServiceCredentials(conf, "cinder")
