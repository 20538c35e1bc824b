"""Fetching boot images: download, checksum verification and a size-bounded cache.

Images come from ``http(s)://`` or ``file://`` URLs, or from the Image
service (:mod:`corral.baremetal.drivers.glance`).  A download is
checked against the node's ``instance_info``: ``image_os_hash_algo`` +
``image_os_hash_value`` when given, else ``image_checksum`` (an MD5 hex
digest, ``<algorithm>:<digest>``, or the URL of a checksum file listing
the image's file name); an Image service image against its own
``os_hash_value``.  Nothing is used before its checksum matched, and a
cached image with a checksum is checked again each time it is reused (a
copy damaged on disk is fetched anew).

The cache keeps verified images under ``[deploy] iso_master_path``.  A
cached image is *in use* while it has a second hard link (the copy a node
publishes in ``[deploy] http_root``); unused images older than
``[deploy] iso_cache_ttl`` go first, then the least recently used unused
ones, until a new image fits under ``[deploy] iso_cache_size``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import requests

from corral.baremetal.drivers.base import DriverError, InvalidParameterValue

LOG = logging.getLogger(__name__)

URL_SCHEMES = ("http", "https", "file")
HASH_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")
CHUNK = 1024 * 1024


class ImageDownloadFailed(DriverError):
    """The image could not be fetched."""


class ImageChecksumError(DriverError):
    """The fetched image is not the one the checksum names."""


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    value: str


def check_url(url: Any, field: str, file_paths: Sequence[str]) -> str:
    """``url`` as a usable image URL (InvalidParameterValue names ``field`` otherwise).

    ``file://`` URLs must name a file under one of ``file_paths``
    (``[conductor] file_url_allowed_paths``): the conductor would otherwise
    publish any file it can read.
    """
    if not isinstance(url, str) or not url:
        raise InvalidParameterValue(f"instance_info/{field} must be a URL")
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in URL_SCHEMES:
        raise InvalidParameterValue(
            f"instance_info/{field} {url!r} is not supported: use an http://, https:// or file:// URL"
        )
    if scheme == "file":
        _allowed_file(url, file_paths)
    return url


def _allowed_file(url: str, file_paths: Sequence[str]) -> str:
    path = os.path.realpath(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    for allowed in file_paths:
        root = os.path.realpath(allowed)
        if os.path.commonpath([root, path]) == root:
            return path
    raise InvalidParameterValue(
        f"Security: the path of {url} is not under [conductor] file_url_allowed_paths, so it is not allowed "
        "as an image source"
    )


def expected_checksum(
    instance_info: Mapping[str, Any], image_url: str, *, verify_tls: bool | str = True,
    file_paths: Sequence[str] = (),
) -> Checksum | None:
    """The checksum the image at ``image_url`` must have, from instance_info (None when none is given)."""
    algorithm = instance_info.get("image_os_hash_algo")
    value = instance_info.get("image_os_hash_value")
    if algorithm or value:
        if not algorithm or not value:
            raise InvalidParameterValue("instance_info needs both image_os_hash_algo and image_os_hash_value")
        return _checksum(str(algorithm), str(value))
    legacy = instance_info.get("image_checksum")
    if not legacy:
        return None
    legacy = str(legacy).strip()
    if urllib.parse.urlparse(legacy).scheme in ("http", "https", "file"):
        legacy = _checksum_from_file(legacy, image_url, verify_tls, file_paths)
    if ":" in legacy:
        algorithm, value = legacy.split(":", 1)
        return _checksum(algorithm, value)
    # A bare digest: MD5 (as upstream's image_checksum), or what its length says.
    by_length = {32: "md5", 40: "sha1", 56: "sha224", 64: "sha256", 96: "sha384", 128: "sha512"}
    algorithm = by_length.get(len(legacy))
    if algorithm is None:
        raise InvalidParameterValue(f"instance_info/image_checksum {legacy!r} is not a hexadecimal digest")
    return _checksum(algorithm, legacy)


def _checksum(algorithm: str, value: str) -> Checksum:
    algorithm = algorithm.lower().replace("-", "")
    if algorithm not in HASH_ALGORITHMS:
        raise InvalidParameterValue(
            f"Unsupported image hash algorithm {algorithm!r}: use one of {', '.join(HASH_ALGORITHMS)}"
        )
    value = value.strip().lower()
    if not re.fullmatch(r"[0-9a-f]+", value) or len(value) != hashlib.new(algorithm).digest_size * 2:
        raise InvalidParameterValue(f"Invalid {algorithm} image checksum {value!r}")
    return Checksum(algorithm, value)


def _checksum_from_file(checksum_url: str, image_url: str, verify_tls: bool | str, file_paths: Sequence[str]) -> str:
    """The digest a checksum file (``<digest>  <name>`` lines, or one digest) gives for the image."""
    try:
        text = read_small(checksum_url, verify_tls, file_paths)
    except ImageDownloadFailed as error:
        raise ImageDownloadFailed(f"Failed to download the image checksum file {checksum_url}: {error}") from None
    name = os.path.basename(urllib.parse.urlparse(image_url).path)
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) == 1:
        return lines[0][0]
    for parts in lines:
        if len(parts) >= 2 and parts[-1].lstrip("*") == name:
            return parts[0]
    raise ImageChecksumError(f"The checksum file {checksum_url} has no checksum for {name}")


def read_small(url: str, verify_tls: bool | str, file_paths: Sequence[str], limit: int = CHUNK) -> str:
    """A small text document (a checksum file)."""
    with _open(url, 30, verify_tls, file_paths) as chunks:
        data = b""
        for chunk in chunks:
            data += chunk
            if len(data) > limit:
                raise ImageDownloadFailed(f"{url} is larger than {limit} bytes")
    return data.decode("utf-8", "replace")


@contextlib.contextmanager
def _open(url: str, timeout: float, verify_tls: bool | str, file_paths: Sequence[str]) -> Iterator[Iterator[bytes]]:
    """The body of ``url`` as chunks; ImageDownloadFailed when it cannot be read."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        try:
            handle = open(_allowed_file(url, file_paths), "rb")
        except OSError as error:
            raise ImageDownloadFailed(f"{url}: {error.strerror}") from None
        with handle:
            yield iter(lambda: handle.read(CHUNK), b"")
        return
    try:
        response = requests.get(url, stream=True, timeout=timeout, verify=verify_tls)
    except requests.RequestException as error:
        raise ImageDownloadFailed(f"{url}: {error}") from None
    with response:
        if response.status_code != 200:
            raise ImageDownloadFailed(f"{url} answered HTTP {response.status_code} {response.reason}")

        def chunks() -> Iterator[bytes]:
            try:
                yield from response.iter_content(CHUNK)
            except requests.RequestException as error:
                raise ImageDownloadFailed(f"{url}: {error}") from None

        yield chunks()


class ImageCache:
    """Verified images under ``directory``, at most ``max_bytes`` together."""

    def __init__(self, directory: str, max_bytes: int, ttl_seconds: float, timeout: float,
                 file_paths: Sequence[str] = ()) -> None:
        self.directory = directory
        self.file_paths = list(file_paths)
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self.timeout = timeout

    @classmethod
    def from_conf(cls, conf: Any) -> ImageCache:
        deploy = conf.deploy
        return cls(deploy.iso_master_path, deploy.iso_cache_size * 1024 * 1024, deploy.iso_cache_ttl * 60,
                   deploy.image_download_timeout, conf.conductor.file_url_allowed_paths)

    def fetch(self, url: str, checksum: Checksum | None, *, verify_tls: bool | str = True) -> str:
        """The path of a verified local copy of ``url`` (downloaded unless cached).

        A ``file://`` image without a checksum changed since its copy was
        made or last used (a rebuilt agent ramdisk) is copied again, as
        upstream compares the source's modification time.
        """
        changed_at = None
        if checksum is None and urllib.parse.urlparse(url).scheme == "file":
            with contextlib.suppress(OSError):
                changed_at = os.stat(_allowed_file(url, self.file_paths)).st_mtime
        return self._fetch(url, url, checksum, lambda: _open(url, self.timeout, verify_tls, self.file_paths),
                           changed_at=changed_at)

    def fetch_image(self, image_id: str, checksum: Checksum,
                    open_data: Callable[[], AbstractContextManager[Iterator[bytes]]]) -> str:
        """The path of a verified local copy of image ``image_id`` of the Image service (downloaded unless cached).

        The entry is keyed by the image's id and hash; ``open_data`` gives
        the image's data as it streams from the Image service.
        """
        return self._fetch(f"glance://{image_id}", f"glance://{image_id}", checksum, open_data)

    def image_entry(self, image_id: str, checksum: Checksum) -> str:
        """Where the cache keeps image ``image_id`` of the Image service with that checksum."""
        return self._entry(f"glance://{image_id}", checksum)

    def _entry(self, source: str, checksum: Checksum | None) -> str:
        key = hashlib.sha256(f"{source}\n{checksum.algorithm + ':' + checksum.value if checksum else ''}".encode())
        return os.path.join(self.directory, key.hexdigest()[:32] + ".image")

    def _fetch(self, source: str, label: str, checksum: Checksum | None,
               open_data: Callable[[], AbstractContextManager[Iterator[bytes]]],
               changed_at: float | None = None) -> str:
        os.makedirs(self.directory, exist_ok=True)
        path = self._entry(source, checksum)
        # One download per image, also across conductor processes sharing the directory.
        with self._lock(path):
            if (os.path.exists(path) and (changed_at is None or os.stat(path).st_mtime >= changed_at)
                    and self._fresh(path, checksum, label)):
                os.utime(path)
                LOG.debug("image %s from the cache", label)
                return path
            self._download(label, open_data, path, checksum)
            return path

    def _fresh(self, path: str, checksum: Checksum | None, label: str) -> bool:
        """An image with a checksum is good while its data still matches it; one without is re-fetched after
        the TTL."""
        if checksum is None:
            return time.time() - os.stat(path).st_mtime < self.ttl_seconds
        digest = hashlib.new(checksum.algorithm)
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                digest.update(chunk)
        if digest.hexdigest() == checksum.value:
            return True
        LOG.warning("image cache: the cached copy of image %s no longer matches its %s checksum; fetching it again",
                    label, checksum.algorithm)
        return False

    @contextlib.contextmanager
    def _lock(self, path: str) -> Iterator[None]:
        with open(path + ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _download(self, label: str, open_data: Callable[[], AbstractContextManager[Iterator[bytes]]], path: str,
                  checksum: Checksum | None) -> None:
        digest = hashlib.new(checksum.algorithm) if checksum else None
        handle, partial = tempfile.mkstemp(dir=self.directory, suffix=".part")
        size = 0
        try:
            with os.fdopen(handle, "wb") as out, open_data() as chunks:
                for chunk in chunks:
                    out.write(chunk)
                    size += len(chunk)
                    if digest is not None:
                        digest.update(chunk)
            if digest is not None and checksum is not None and digest.hexdigest() != checksum.value:
                raise ImageChecksumError(
                    f"The checksum of image {label} does not match: expected {checksum.algorithm} "
                    f"{checksum.value}, got {digest.hexdigest()}"
                )
            self._make_room(size, keep=path)
            os.chmod(partial, 0o644)
            os.replace(partial, path)
            LOG.info("image %s cached (%d bytes)", label, size)
        except OSError as error:
            raise ImageDownloadFailed(f"Failed to store image {label}: {error}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)

    def _make_room(self, incoming: int, keep: str) -> None:
        """Evict unused images: expired ones, then the least recently used, until ``incoming`` fits."""
        entries = []
        for name in os.listdir(self.directory):
            if not name.endswith(".image"):
                continue
            full = os.path.join(self.directory, name)
            with contextlib.suppress(FileNotFoundError):
                entries.append((full, os.stat(full)))
        total = sum(stat.st_size for _, stat in entries)
        now = time.time()
        unused = sorted((e for e in entries if e[1].st_nlink == 1 and e[0] != keep), key=lambda e: e[1].st_mtime)
        for full, stat in unused:
            expired = now - stat.st_mtime >= self.ttl_seconds
            if not expired and total + incoming <= self.max_bytes:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
                total -= stat.st_size
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full + ".lock")
                LOG.info("image cache: removed %s", full)
        if total + incoming > self.max_bytes:
            LOG.warning("image cache %s holds %d bytes in use; the new image of %d bytes exceeds its %d byte "
                        "limit", self.directory, total, incoming, self.max_bytes)


def publish(source: str, target: str) -> None:
    """Make ``source`` available at ``target``: a hard link (marks a cached image in use), else a copy."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = target + ".part"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial)
    try:
        os.link(source, partial)
    except OSError:
        import shutil

        shutil.copyfile(source, partial)
    os.chmod(partial, 0o644)
    os.replace(partial, target)


def served_url(task: Any, relative: str) -> str:
    """The URL of ``<[deploy] http_root>/<relative>``: under ``[deploy] http_url``, else the conductor's file server."""
    base = task.conductor.conf.deploy.http_url or getattr(task.conductor, "file_server_url", None)
    if not base:
        raise DriverError("No [deploy] http_url is set and the conductor serves no files: machines cannot be "
                          "given an image URL")
    return f"{base.rstrip('/')}/{relative}"
