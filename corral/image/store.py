"""Where image data lives: glance_store's drivers, and the staging directory.

:class:`ImageStore` loads the drivers ``[glance_store] stores`` names
(``file``, ``http``, ``rbd``, ``swift``, ``s3``, ``cinder``...) with
glance_store's own option names, and writes new images to the driver of
``[glance_store] default_store``.  The drivers are kept on the instance
rather than in glance_store's process-wide scheme map, so two
applications in one process (tests, or two configurations) never share
one.  The filesystem driver streams uploads straight to
``filesystem_store_datadir/<image id>`` and removes what it wrote when an
upload fails; several API processes or hosts share images by sharing that
directory.

:class:`Staging` keeps the data of glance-direct imports between the
``stage`` call and the ``import`` call, one file per image under
``node_staging_uri``, which every API process must see.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import glance_store
from glance_store import location as store_location
from oslo_config import cfg
from stevedore import driver as stevedore_driver

LOG = logging.getLogger(__name__)

CHUNK = 1024 * 1024


class StoreError(Exception):
    """The store refused or failed; ``kind`` says how (see the subclasses)."""


class StorageFull(StoreError):
    pass


class StorageWriteDenied(StoreError):
    pass


class DataNotFound(StoreError):
    pass


class SizeMismatch(StoreError):
    pass


@dataclass(frozen=True)
class Stored:
    location: str
    size: int
    checksum: str
    multihash: str


class ImageStore:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf
        self._drivers: dict[str, Any] = {}
        for entry in dict.fromkeys(conf.glance_store.stores):
            store = _load_driver(conf, entry)
            for scheme in store.get_schemes():
                self._drivers.setdefault(scheme, store)
        default = conf.glance_store.default_store
        if default not in self._drivers:
            raise ValueError(f"[glance_store] default_store {default!r} is not one of the enabled stores "
                             f"({', '.join(conf.glance_store.stores)})")
        self.default_scheme = default
        self._default = self._drivers[default]

    @property
    def store_id(self) -> str:
        """The one store's name in ``/v2/info/stores``."""
        return self.default_scheme

    def add(self, image_id: str, data: IO[bytes], size: int, hashing_algo: str) -> Stored:
        """Write ``data`` (``size`` bytes, 0 when unknown) as the image's data."""
        try:
            return self._add(image_id, data, size, hashing_algo)
        except glance_store.exceptions.Duplicate:
            # Data left behind by an upload that died with its process
            # (nothing refers to it, the image being queued): it goes, once.
            LOG.warning("image %s: removing stale data found in the store before writing", image_id)
            self.remove_partial(image_id)
            return self._add(image_id, data, size, hashing_algo)

    def _add(self, image_id: str, data: IO[bytes], size: int, hashing_algo: str) -> Stored:
        try:
            location, written, checksum, multihash, _ = self._default.add(image_id, data, size, hashing_algo)
        except glance_store.exceptions.StorageFull as error:
            raise StorageFull(str(error)) from None
        except glance_store.exceptions.StorageWriteDenied as error:
            raise StorageWriteDenied(str(error)) from None
        except glance_store.exceptions.Invalid as error:
            raise SizeMismatch(str(error)) from None
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EFBIG):
                raise StorageFull(str(error)) from None
            raise
        return Stored(location, written, checksum, multihash)

    def open(self, location: str, offset: int = 0, length: int | None = None) -> Iterator[bytes]:
        """The image's data from ``offset``, ``length`` bytes of it (all when None)."""
        store, loc = self._locate(location)
        try:
            chunks, _ = store.get(loc, offset=offset, chunk_size=length)
        except glance_store.exceptions.NotFound as error:
            raise DataNotFound(str(error)) from None
        return iter(chunks)

    def delete(self, location: str) -> None:
        """Remove an image's data; data already gone is not an error."""
        store, loc = self._locate(location)
        with contextlib.suppress(glance_store.exceptions.NotFound):
            store.delete(loc)

    def remove_partial(self, image_id: str) -> None:
        """Remove what an upload that died with its process may have left (filesystem store)."""
        store = self._default
        if getattr(store, "multiple_datadirs", False):
            datadirs = [path for paths in store.priority_data_map.values() for path in paths]
        else:
            datadirs = [store.datadir] if getattr(store, "datadir", None) else []
        for datadir in datadirs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(datadir, image_id))
                LOG.info("image %s: removed half-written data in %s", image_id, datadir)

    def _locate(self, location: str) -> tuple[Any, Any]:
        scheme = urllib.parse.urlparse(location).scheme
        store = self._drivers.get(scheme)
        if store is None:
            raise DataNotFound(f"no enabled store handles {scheme}:// locations")
        loc = store_location.Location(scheme, store.get_store_location_class(), self._conf, uri=location)
        return store, loc


def _load_driver(conf: cfg.ConfigOpts, entry: str) -> Any:
    manager = stevedore_driver.DriverManager("glance_store.drivers", entry, invoke_args=[conf],
                                             invoke_on_load=True)
    store = manager.driver
    store.configure(re_raise_bsc=True)
    return store


class Staging:
    """Staged data of glance-direct imports, one file per image."""

    def __init__(self, uri: str) -> None:
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme != "file":
            raise ValueError(f"node_staging_uri {uri!r} must be a file:// URL")
        self.directory = parsed.path.rstrip("/") or "/"

    def path(self, image_id: str) -> str:
        return os.path.join(self.directory, image_id)

    def write(self, image_id: str, data: IO[bytes]) -> int:
        """Stream ``data`` to the image's staging file; the bytes written.

        A failure part-way removes what was written.
        """
        os.makedirs(self.directory, exist_ok=True)
        path = self.path(image_id)
        written = 0
        try:
            with open(path, "xb") as out:
                while chunk := data.read(CHUNK):
                    out.write(chunk)
                    written += len(chunk)
        except FileExistsError:
            raise
        except BaseException as error:
            self.remove(image_id)
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EFBIG):
                raise StorageFull(str(error)) from None
            raise
        return written

    def open(self, image_id: str) -> IO[bytes]:
        try:
            return open(self.path(image_id), "rb")
        except FileNotFoundError:
            raise DataNotFound(f"no staged data for image {image_id}") from None

    def remove(self, image_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(image_id))
