"""Pure logic of virtual media deployments: checksums, the image cache, the file server, boot modes."""

from __future__ import annotations

import hashlib
import os
import time
from types import SimpleNamespace

import pytest

from corral.baremetal.conductor.file_server import make_app
from corral.baremetal.drivers import images, vmedia
from corral.baremetal.drivers.base import InvalidParameterValue


def test_checksum_from_os_hash_fields_wins_over_image_checksum() -> None:
    info = {"image_os_hash_algo": "SHA-512", "image_os_hash_value": "AB" * 64, "image_checksum": "0" * 32}
    assert images.expected_checksum(info, "http://x/a.iso") == images.Checksum("sha512", "ab" * 64)


@pytest.mark.parametrize(("value", "expected"), [
    ("0" * 32, images.Checksum("md5", "0" * 32)),
    ("sha256:" + "f" * 64, images.Checksum("sha256", "f" * 64)),
    ("1" * 64, images.Checksum("sha256", "1" * 64)),
])
def test_image_checksum_forms(value, expected) -> None:
    assert images.expected_checksum({"image_checksum": value}, "http://x/a.iso") == expected


@pytest.mark.parametrize(("info", "message"), [
    ({"image_checksum": "xyz"}, "is not a hexadecimal digest"),
    ({"image_checksum": "sha256:1234"}, "Invalid sha256 image checksum"),
    ({"image_checksum": "crc32:00000000"}, "Unsupported image hash algorithm"),
    ({"image_os_hash_algo": "sha256"}, "needs both image_os_hash_algo and image_os_hash_value"),
])
def test_bad_checksums_are_refused(info, message) -> None:
    with pytest.raises(InvalidParameterValue, match=message):
        images.expected_checksum(info, "http://x/a.iso")


def test_checksum_file_lists_the_image_by_name(tmp_path) -> None:
    digest = hashlib.sha256(b"iso").hexdigest()
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{'0' * 64}  other.iso\n{digest} *live.iso\n")
    info = {"image_checksum": sums.as_uri()}
    allowed = [str(tmp_path)]
    assert images.expected_checksum(info, "http://x/live.iso", file_paths=allowed) == \
        images.Checksum("sha256", digest)
    with pytest.raises(images.ImageChecksumError, match="has no checksum for missing.iso"):
        images.expected_checksum(info, "http://x/missing.iso", file_paths=allowed)
    with pytest.raises(InvalidParameterValue, match="not under \\[conductor\\] file_url_allowed_paths"):
        images.expected_checksum(info, "http://x/live.iso", file_paths=[str(tmp_path / "elsewhere")])


def test_file_urls_only_under_the_allowed_paths(tmp_path) -> None:
    (tmp_path / "images").mkdir()
    allowed = [str(tmp_path / "images")]
    assert images.check_url((tmp_path / "images" / "a.iso").as_uri(), "boot_iso", allowed)
    for url in ("file:///etc/shadow", (tmp_path / "images").as_uri() + "/../secret.iso"):
        with pytest.raises(InvalidParameterValue, match="Security: the path of"):
            images.check_url(url, "boot_iso", allowed)
    with pytest.raises(InvalidParameterValue, match="Security: the path of"):
        images.ImageCache(str(tmp_path / "cache"), 100, 60, 10, allowed).fetch("file:///etc/hostname", None)


def _cache(tmp_path, max_bytes=100, ttl=3600.0) -> images.ImageCache:
    return images.ImageCache(str(tmp_path / "cache"), max_bytes, ttl, 10, [str(tmp_path)])


def _source(tmp_path, name, size) -> str:
    path = tmp_path / name
    path.write_bytes(name.encode()[:1] * size)
    return path.as_uri()


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def test_cache_reuses_a_verified_image_and_refetches_an_unverified_one_after_the_ttl(tmp_path) -> None:
    cache = _cache(tmp_path, ttl=60)
    url = _source(tmp_path, "a", 10)
    checksum = images.Checksum("sha256", hashlib.sha256(b"a" * 10).hexdigest())
    first = cache.fetch(url, checksum)
    (tmp_path / "a").write_bytes(b"changed")
    assert cache.fetch(url, checksum) == first and _read(first) == b"a" * 10
    unverified = cache.fetch(url, None)
    assert _read(unverified) == b"changed"
    # Unchanged, it is reused until the TTL, then copied again.
    copy = os.stat(unverified).st_ino
    assert cache.fetch(url, None) == unverified and os.stat(unverified).st_ino == copy
    old = time.time() - 120
    os.utime(tmp_path / "a", (old - 10, old - 10))
    os.utime(unverified, (old, old))
    assert cache.fetch(url, None) == unverified and os.stat(unverified).st_ino != copy


def test_cache_copies_a_file_again_once_it_changed(tmp_path) -> None:
    """A rebuilt agent ramdisk at the same file:// URL is used at the next boot, within the TTL."""
    cache = _cache(tmp_path, ttl=3600)
    url = _source(tmp_path, "ramdisk", 10)
    first = _read(cache.fetch(url, None))
    assert first == b"r" * 10
    (tmp_path / "ramdisk").write_bytes(b"rebuilt")
    later = time.time() + 5
    os.utime(tmp_path / "ramdisk", (later, later))
    assert _read(cache.fetch(url, None)) == b"rebuilt" != first


def test_cache_evicts_least_recently_used_unused_images_but_never_published_ones(tmp_path) -> None:
    cache = _cache(tmp_path, max_bytes=100)
    in_use = cache.fetch(_source(tmp_path, "u", 40), None)
    images.publish(in_use, str(tmp_path / "http" / "boot.iso"))
    older = cache.fetch(_source(tmp_path, "o", 30), None)
    os.utime(older, (time.time() - 50, time.time() - 50))
    newer = cache.fetch(_source(tmp_path, "n", 20), None)
    cache.fetch(_source(tmp_path, "x", 30), None)  # 40 + 30 + 20 + 30 > 100: the oldest unused one goes
    assert os.path.exists(in_use) and os.path.exists(newer) and not os.path.exists(older)
    cache.fetch(_source(tmp_path, "y", 90), None)  # does not fit even when every unused image went
    assert os.path.exists(in_use) and not os.path.exists(newer)


def test_cache_drops_expired_unused_images(tmp_path) -> None:
    cache = _cache(tmp_path, max_bytes=1000, ttl=60)
    expired = cache.fetch(_source(tmp_path, "e", 10), None)
    os.utime(expired, (time.time() - 61, time.time() - 61))
    cache.fetch(_source(tmp_path, "f", 10), None)
    assert not os.path.exists(expired)


def test_a_missing_file_is_a_download_failure(tmp_path) -> None:
    with pytest.raises(images.ImageDownloadFailed, match="No such file or directory"):
        _cache(tmp_path).fetch((tmp_path / "none.iso").as_uri(), None)
    assert [n for n in os.listdir(tmp_path / "cache") if not n.endswith(".lock")] == []


def _get(app, path, method="GET"):
    seen = {}
    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path},
                        lambda status, headers: seen.update(status=status)))
    return seen["status"], body


def test_file_server_serves_only_files_under_its_root(tmp_path) -> None:
    root = tmp_path / "root"
    (root / "redfish").mkdir(parents=True)
    (root / "redfish" / "boot.iso").write_bytes(b"iso")
    (tmp_path / "secret").write_bytes(b"no")
    app = make_app(str(root))
    assert _get(app, "/redfish/boot.iso") == ("200 OK", b"iso")
    assert _get(app, "/redfish/boot.iso", "HEAD") == ("200 OK", b"")
    for path in ("/../secret", "/redfish/%2e%2e/%2e%2e/secret", "/redfish", "/", "/nothing"):
        assert _get(app, path)[0] == "404 Not Found", path
    assert _get(app, "/redfish/boot.iso", "PUT")[0] == "405 Method Not Allowed"


@pytest.mark.parametrize(("node", "expected"), [
    ({"properties": {"capabilities": "boot_mode:bios,secure_boot:false"}}, "bios"),
    ({"properties": {"capabilities": {"boot_mode": "bios"}}}, "bios"),
    ({"properties": {"capabilities": "boot_mode:bios"}, "instance_info": {"deploy_boot_mode": "uefi"}}, "uefi"),
    ({"properties": {}}, "uefi"),
])
def test_boot_mode_sources(node, expected) -> None:
    conf = SimpleNamespace(deploy=SimpleNamespace(default_boot_mode="uefi"))
    assert vmedia.boot_mode({"uuid": "n", **node}, conf) == expected


def test_unknown_boot_mode_is_refused() -> None:
    conf = SimpleNamespace(deploy=SimpleNamespace(default_boot_mode="uefi"))
    with pytest.raises(InvalidParameterValue, match="Invalid boot mode 'legacy'"):
        vmedia.boot_mode({"uuid": "n", "properties": {"capabilities": "boot_mode:legacy"}}, conf)
