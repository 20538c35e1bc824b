"""Config drives built in memory: the files, the label, the encodings, the limits."""

from __future__ import annotations

import base64
import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.core import configdrive

META = {"uuid": "6f1c2c1e-9d7c-4a4b-9f51-2f4a3b1d8e10", "name": "vm-1", "hostname": "vm-1",
        "public_keys": {"0": "ssh-ed25519 AAAAC3Nza test@example"}}


def test_the_drive_holds_every_file_under_each_version() -> None:
    image = configdrive.build(META, "#cloud-config\nhostname: vm-1\n", {"links": [], "networks": []}, {"a": 1})
    assert configdrive.label(image) == "config-2"
    found = configdrive.read(image)
    assert sorted(found) == [f"openstack/{version}/{name}" for version in ("2012-08-10", "latest")
                             for name in ("meta_data.json", "network_data.json", "user_data", "vendor_data2.json")]
    assert found["openstack/latest/meta_data.json"].startswith(b'{"uuid":"6f1c2c1e')
    assert found["openstack/2012-08-10/user_data"] == b"#cloud-config\nhostname: vm-1\n"


def test_optional_files_are_left_out() -> None:
    assert sorted(configdrive.read(configdrive.build(META))) == [
        "openstack/2012-08-10/meta_data.json", "openstack/latest/meta_data.json"]


def test_binary_user_data_and_encodings_round_trip() -> None:
    user_data = bytes(range(256)) * 4
    image = configdrive.build(META, user_data)
    encoded = configdrive.encode(image)
    assert gzip.decompress(base64.b64decode(encoded)) == image
    assert configdrive.decode(encoded) == image
    assert configdrive.decode(base64.b64encode(image).decode()) == image
    assert configdrive.read(configdrive.decode(encoded))["openstack/latest/user_data"] == user_data


@pytest.mark.parametrize("text", ["not base64!", base64.b64encode(b"\x1f\x8bgarbage").decode()])
def test_bad_encodings_are_refused(text: str) -> None:
    with pytest.raises(configdrive.ConfigDriveError):
        configdrive.decode(text)


def test_a_file_that_is_not_an_iso_is_refused() -> None:
    with pytest.raises(configdrive.ConfigDriveError):
        configdrive.read(b"\0" * 65536)


def test_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(configdrive, "MAX_SIZE", 100_000)
    with pytest.raises(configdrive.ConfigDriveError, match="more than the 100000 bytes allowed"):
        configdrive.build(META, b"x" * 200_000)


@pytest.mark.skipif(shutil.which("xorriso") is None, reason="xorriso is not installed")
def test_other_iso_readers_see_the_same_names(tmp_path: Path) -> None:
    path = tmp_path / "drive.iso"
    path.write_bytes(configdrive.build(META, "x"))
    listing = subprocess.run(["xorriso", "-indev", str(path), "-find", "/"], capture_output=True, text=True,
                             check=True).stdout
    assert "'/openstack/latest/meta_data.json'" in listing
    assert "'/openstack/2012-08-10/user_data'" in listing
