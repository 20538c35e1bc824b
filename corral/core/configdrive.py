"""Config drives: the ``config-2`` ISO 9660 image cloud-init and Glean read at first boot.

Compute builds one for a server (``meta_data.json`` with its UUID, name,
hostname and keys, ``user_data``, ``network_data.json``) and hands it to
Bare Metal gzipped and base64-encoded, as Nova's ironic driver does; Bare
Metal builds one itself from a JSON ``configdrive`` (API 1.56), as Ironic
does.  Files go under ``openstack/<version>/`` for each metadata version
(``2012-08-10`` and ``latest`` by default, as openstacksdk's builder
writes them), on a volume labelled ``config-2`` with Joliet and Rock Ridge
names.  The image is made in memory by pycdlib: no external tool.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import pycdlib

LABEL = "config-2"
VERSIONS = ("2012-08-10", "latest")
# The agent writes the drive to a partition of at most 64 MiB (ironic-python-agent's limit).
MAX_SIZE = 64 * 1024 * 1024


class ConfigDriveError(ValueError):
    """A config drive that cannot be built or read."""


def files(meta_data: Mapping[str, Any], user_data: bytes | str | None = None,
          network_data: Mapping[str, Any] | None = None, vendor_data: Mapping[str, Any] | None = None,
          versions: Iterable[str] = VERSIONS) -> dict[str, bytes]:
    """Path -> content of every file of the drive."""
    contents: dict[str, bytes] = {}
    for version in versions:
        base = f"openstack/{version}"
        contents[f"{base}/meta_data.json"] = orjson.dumps(meta_data)
        if network_data:
            contents[f"{base}/network_data.json"] = orjson.dumps(network_data)
        if vendor_data:
            contents[f"{base}/vendor_data2.json"] = orjson.dumps(vendor_data)
        if user_data:
            contents[f"{base}/user_data"] = user_data.encode() if isinstance(user_data, str) else user_data
    return contents


def build_iso(contents: Mapping[str, bytes]) -> bytes:
    """An ISO 9660 image (Joliet, Rock Ridge) labelled ``config-2`` holding ``contents``."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=4, joliet=3, rock_ridge="1.09", vol_ident=LABEL)
    directories: set[str] = set()
    for index, (path, data) in enumerate(sorted(contents.items())):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory not in directories:
                directories.add(directory)
                iso.add_directory(_iso9660_name(directory, index, is_dir=True), rr_name=parts[depth - 1],
                                  joliet_path="/" + directory)
        iso.add_fp(io.BytesIO(data), len(data), _iso9660_name(path, index), rr_name=parts[-1],
                   joliet_path="/" + path)
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()


def _iso9660_name(path: str, index: int, *, is_dir: bool = False) -> str:
    """A unique, valid ISO 9660 level-4 name for ``path`` (the real names are Rock Ridge and Joliet's)."""
    parts = []
    for part in path.split("/"):
        cleaned = "".join(c if c.isalnum() else "_" for c in part.upper())[:30] or "_"
        parts.append(cleaned)
    name = "/" + "/".join(parts)
    return name if is_dir else f"{name};1"


def build(meta_data: Mapping[str, Any], user_data: bytes | str | None = None,
          network_data: Mapping[str, Any] | None = None, vendor_data: Mapping[str, Any] | None = None) -> bytes:
    """The drive's ISO image, refused beyond :data:`MAX_SIZE`."""
    image = build_iso(files(meta_data, user_data, network_data, vendor_data))
    if len(image) > MAX_SIZE:
        raise ConfigDriveError(f"The config drive is {len(image)} bytes, more than the {MAX_SIZE} bytes allowed")
    return image


def encode(image: bytes) -> str:
    """gzip + base64, the form a provision request carries."""
    return base64.b64encode(gzip.compress(image, mtime=0)).decode()


def decode(text: str) -> bytes:
    """The ISO image from its gzip + base64 form (plain base64 is accepted too)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ConfigDriveError(f"The config drive is not valid base64: {error}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise ConfigDriveError(f"The config drive is not valid gzip: {error}") from None
    return raw


def decoded_size(text: str, limit: int) -> int:
    """The size of the image a gzip + base64 (or plain base64) config drive holds, counted up to ``limit`` + 1.

    Whitespace is ignored, as the agent's decoder ignores it; a
    decompression never produces more than ``limit`` + 1 bytes, whatever the
    compressed data claims.
    """
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise ConfigDriveError(f"The config drive is not valid base64: {error}") from None
    if raw[:2] != b"\x1f\x8b":
        return len(raw)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    size = 0
    data = raw
    try:
        while data and size <= limit:
            size += len(inflater.decompress(data, limit + 1 - size))
            data = inflater.unconsumed_tail
        if size <= limit:
            size += len(inflater.flush())
    except zlib.error as error:
        raise ConfigDriveError(f"The config drive is not valid gzip: {error}") from None
    return size


def read(image: bytes) -> dict[str, bytes]:
    """Path -> content of the files on a drive (by their Rock Ridge names)."""
    iso = pycdlib.PyCdlib()
    try:
        iso.open_fp(io.BytesIO(image))
    except pycdlib.pycdlibexception.PyCdlibException as error:
        raise ConfigDriveError(f"The config drive is not an ISO 9660 image: {error}") from None
    found: dict[str, bytes] = {}
    try:
        for root, _dirs, names in iso.walk(rr_path="/"):
            for name in names:
                path = f"{root.rstrip('/')}/{name}"
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, rr_path=path)
                found[path.lstrip("/")] = out.getvalue()
    finally:
        iso.close()
    return found


def label(image: bytes) -> str:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    try:
        return iso.pvd.volume_identifier.decode().strip()
    finally:
        iso.close()
