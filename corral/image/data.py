"""Writing image data: uploads, staging and imports, streamed and checked as they go.

Every write of data holds a lease on its image (``lease_token``,
``lease_expires``): the image moves to ``saving`` (an upload),
``uploading`` (staging) or ``importing`` under the lease, which the
writer renews while data flows.  The writer alone records the outcome:
``active`` with the checksum (MD5), ``os_hash_value``
(``[DEFAULT] hashing_algorithm``), size and virtual size computed while the
data streamed; or, on any failure, back to ``queued`` with nothing left in
the store.  A writer whose process dies leaves a lease that expires, and
:func:`recover_expired` (run by every API process) removes what it had
half written and puts the image back in ``queued``.

The data passes through oslo.utils' format inspector on its way to the
store; an image whose data is not its ``disk_format``, or which fails the
inspector's safety checks (a qcow2 with a backing file or an external data
file, a VMDK whose extents name other files...), is refused with Glance's
error and its data removed.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from oslo_utils.imageutils import format_inspector

from corral.core.db import Database
from corral.image.db import images as image_db
from corral.image.domain import quotas
from corral.image.domain.images import ImageError, now
from corral.image.store import (
    DataNotFound,
    ImageStore,
    SizeMismatch,
    Staging,
    StorageFull,
    StorageWriteDenied,
)

LOG = logging.getLogger(__name__)



class LeaseLost(Exception):
    """The writer's lease was taken over (it was too slow to renew it): it must stop."""


class _CountingReader:
    """A file-like view of the incoming data that counts it, caps it and keeps the lease alive."""

    def __init__(self, source: IO[bytes], cap: int, too_large: Callable[[], Exception],
                 keep_alive: Callable[[], None], renew_every: float) -> None:
        self._source = source
        self._renew_every = renew_every
        self._cap = cap
        self._too_large = too_large
        self._keep_alive = keep_alive
        self._renewed = time.monotonic()
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._source.read(size)
        self.count += len(chunk)
        if self.count > self._cap:
            raise self._too_large()
        if time.monotonic() - self._renewed > self._renew_every:
            self._keep_alive()
            self._renewed = time.monotonic()
        return chunk


@dataclass
class Writer:
    """Everything a data write needs."""

    db: Database
    store: ImageStore
    staging: Staging
    conf: Any

    def _expires(self) -> datetime.datetime:
        return now() + datetime.timedelta(seconds=self.conf.corral_image.lease_duration)

    def _reader(self, image: dict[str, Any], source: IO[bytes], cap: int, too_large: Callable[[], Exception],
                token: str) -> _CountingReader:
        # Renewed well before it could expire (a sixth of its duration).
        renew_every = self.conf.corral_image.lease_duration / 6
        return _CountingReader(source, cap, too_large, self._renew(image["id"], token), renew_every)

    def _take(self, image: dict[str, Any], from_status: str, to_status: str, size: int | None,
              check: Callable[[Any, str, dict[str, int], int | None], None]) -> str:
        token = secrets.token_hex(16)

        def take(conn: Any) -> None:
            if image["owner"] is not None:
                check(self.conf, image["owner"], image_db.owner_usage(conn, image["owner"]), size)
            if not image_db.take_lease(conn, image, from_status=from_status, to_status=to_status, token=token,
                                       expires=self._expires()):
                raise ImageError(409, f"Image status transition from {image['status']} to {to_status} is not "
                                      "allowed")

        self.db.write(take)
        return token

    def _renew(self, image_id: str, token: str) -> Callable[[], None]:
        def renew() -> None:
            if not self.db.write(image_db.renew_lease, image_id, token, self._expires()):
                raise LeaseLost(f"image {image_id}: the upload's lease was taken over")

        return renew

    def _end(self, image_id: str, token: str, values: dict[str, Any],
             properties: dict[str, str] | None = None) -> bool:
        return self.db.write(image_db.end_lease, image_id, token, values, properties)

    def _cap(self, image: dict[str, Any], size: int | None) -> tuple[int, Callable[[], Exception]]:
        """Most bytes the data may have, and what exceeding it raises."""
        cap = self.conf.image_size_cap
        if size is not None and size > cap:
            raise ImageError(413, "The incoming image is too large: The provided image is too large.")

        def too_large() -> Exception:
            return ImageError(413, "The incoming image is too large: The provided image is too large.")

        if image["owner"] is None:
            return cap, too_large
        with self.db.read() as conn:
            room = quotas.storage_room(self.conf, image_db.owner_usage(conn, image["owner"]))
        if room is None or room >= cap:
            return cap, too_large
        if size is not None and size > room:
            raise quotas.storage_full(size, room)
        return room, lambda: quotas.storage_full(size or room + 1, room)

    # ----------------------------------------------------------- uploads

    def upload(self, image: dict[str, Any], source: IO[bytes], size: int | None, content_md5: str | None) -> None:
        """``PUT /file``: the data becomes the image's, or nothing changes."""
        cap, too_large = self._cap(image, size)
        token = self._take(image, "queued", "saving", size, quotas.check_upload)
        try:
            values = self._store(image, source, size, cap, too_large, token, content_md5)
        except BaseException:
            self._end(image["id"], token, {"status": "queued"})
            raise
        if not self._end(image["id"], token, values):
            self.store.delete(values["location"])
            raise ImageError(410, f"Image {image['id']} could not be found after upload. The image may have been "
                                  "deleted during the upload, cleaning up the chunks uploaded.")

    def _store(self, image: dict[str, Any], source: IO[bytes], size: int | None, cap: int,
               too_large: Callable[[], Exception], token: str, content_md5: str | None = None) -> dict[str, Any]:
        """Stream ``source`` into the store, inspect it; the image's new values (status ``active``)."""
        reader = self._reader(image, source, cap, too_large, token)
        inspected = format_inspector.InspectWrapper(reader) if image["container_format"] == "bare" else None
        try:
            stored = self.store.add(image["id"], inspected or reader, size or 0, self.conf.hashing_algorithm)
        except StorageFull as error:
            raise ImageError(413, f"Image storage media is full: {error}") from None
        except StorageWriteDenied as error:
            raise ImageError(503, f"Insufficient permissions on image storage media: {error}") from None
        except SizeMismatch as error:
            raise ImageError(400, str(error)) from None
        except format_inspector.ImageFormatError as error:
            raise ImageError(415, str(error)) from None
        finally:
            if inspected is not None:
                inspected.close()
        try:
            virtual_size = _inspect(image, inspected, self.conf) if inspected is not None else None
            # (The store computed the data's MD5 as it wrote it.)
            _check_md5(content_md5, stored.checksum)
        except ImageError:
            self.store.delete(stored.location)
            raise
        return {"status": "active", "location": stored.location, "size": stored.size,
                "checksum": stored.checksum, "os_hash_algo": self.conf.hashing_algorithm,
                "os_hash_value": stored.multihash, "virtual_size": virtual_size}

    # ----------------------------------------------------------- staging

    def stage(self, image: dict[str, Any], source: IO[bytes], size: int | None) -> None:
        """``PUT /stage``: keep the data for a later glance-direct import (status ``uploading``)."""
        cap, too_large = self._cap(image, size)
        token = self._take(image, "queued", "uploading", size, quotas.check_stage)
        try:
            reader = self._reader(image, source, cap, too_large, token)
            try:
                written = self.staging.write(image["id"], reader)
            except FileExistsError:
                raise ImageError(409, f"The image {image['id']} has data on staging") from None
            except StorageFull as error:
                raise ImageError(413, f"Image storage media is full: {error}") from None
        except BaseException:
            self._end(image["id"], token, {"status": "queued"})
            raise
        if not self._end(image["id"], token, {"status": "uploading", "size": written, "staged_size": written}):
            self.staging.remove(image["id"])
            raise ImageError(410, f"Image {image['id']} could not be found after upload. The image may have been "
                                  "deleted during the upload, cleaning up the chunks uploaded.")

    # ----------------------------------------------------------- imports

    def start_import(self, image: dict[str, Any], method: str) -> str:
        """Take the image for an import (``importing``); the lease token."""
        from_status = "uploading" if method == "glance-direct" else "queued"
        if image["status"] != from_status:
            if method == "glance-direct":
                raise ImageError(409, f"Image status {image['status']} is not valid for the glance-direct import "
                                      "method: the image must have been staged (status uploading).")
            raise ImageError(409, f"Image status {image['status']} is not valid for the web-download import "
                                  "method: the image must be queued.")
        check = quotas.check_upload if method == "web-download" else quotas.check_size
        return self._take(image, from_status, "importing", image["size"], check)

    def finish_import(self, image: dict[str, Any], token: str, open_source: Callable[[], Any],
                      after: Callable[[], None] = lambda: None) -> None:
        """Run an import taken by :meth:`start_import`: the image ends ``active``, or ``queued`` with why."""
        try:
            cap, too_large = self._cap(image, None)
            with open_source() as source:
                values = self._store(image, source, None, cap, too_large, token)
        except Exception as error:  # noqa: BLE001 - any failure ends the import; the image records it
            message = error.message if isinstance(error, ImageError) else str(error)
            LOG.warning("image %s: import failed: %s", image["id"], message)
            after()
            self._end(image["id"], token, {"status": "queued", "staged_size": None},
                      properties=dict(image["properties"], os_glance_failed_import=self.store.store_id,
                                      os_glance_importing_to_stores=""))
            return
        # The staged copy goes before the image is active, so that a client
        # seeing ``active`` never finds staged data left behind.
        after()
        properties = dict(image["properties"], os_glance_failed_import="", os_glance_importing_to_stores="")
        values["staged_size"] = None
        if not self._end(image["id"], token, values, properties=properties):
            self.store.delete(values["location"])


def _check_md5(header: str | None, digest: str) -> None:
    """``Content-MD5`` sent with an upload (base64 as RFC 1864 has it, or hex) must match the data."""
    if not header:
        return
    expected = header.strip().lower()
    if len(expected) != 32:
        with contextlib.suppress(binascii.Error, ValueError):
            expected = base64.b64decode(header.strip(), validate=True).hex()
    if expected != digest:
        raise ImageError(400, f"The uploaded data's MD5 checksum {digest} does not match the Content-MD5 header.")


def _inspect(image: dict[str, Any], inspected: Any, conf: Any) -> int | None:
    """The virtual size the inspector found, after checking format and safety as Glance does."""
    disk_format = image["disk_format"]
    inspector = None
    try:
        matches = {str(found): found for found in inspected.formats or ()}
        # A bootable ISO may legitimately carry a GPT in front.
        inspector = matches["iso"] if matches.keys() == {"iso", "gpt"} else inspected.format
        detected = str(inspector)
        virtual_size = None
        if detected == disk_format:
            virtual_size = inspector.virtual_size
        elif detected == "raw" and disk_format not in format_inspector.ALL_FORMATS:
            pass  # formats the inspector cannot recognise (ami, ...) pass as they are
        elif disk_format == "raw":
            virtual_size = inspector.actual_size
        else:
            raise format_inspector.ImageFormatError(
                f"Image disk_format {disk_format} does not match stream data {detected}")
        inspector.safety_check()
        return virtual_size or None
    except format_inspector.ImageFormatError as error:
        if conf.image_format.require_image_format_match:
            raise ImageError(415, str(error)) from None
        LOG.warning("image %s: format %s did not match; no virtual size", image["id"], disk_format)
        return None
    except format_inspector.SafetyCheckFailed as error:
        fatal = set(error.failures) - set(conf.image_format.gpt_safety_checks_nonfatal)
        if inspector is not None and inspector.NAME == "gpt" and not fatal:
            LOG.warning("image %s: non-fatal %s", image["id"], error)
            return None
        LOG.warning("image %s: %s", image["id"], error)
        raise ImageError(415, "Image failed safety checks") from None


# ------------------------------------------------------------- recovery


def recover_expired(db: Database, store: ImageStore, staging: Staging) -> int:
    """Put images whose writer died back in ``queued``, removing what it half wrote."""
    moment = now()
    with db.read() as conn:
        expired = image_db.expired_leases(conn, moment)
    recovered = 0
    for row in expired:
        # First take the lease over (the writer may have renewed it since
        # the read); only its holder removes data.
        token = secrets.token_hex(16)
        if not db.write(image_db.claim_expired, row["id"], row["lease_token"], token, moment):
            continue
        if row["status"] == "saving" or row["status"] == "importing":
            store.remove_partial(row["id"])
        if row["status"] in ("uploading", "importing"):
            staging.remove(row["id"])
        values = {"status": "queued", "staged_size": None}
        if db.write(image_db.end_lease, row["id"], token, values):
            LOG.warning("image %s: its %s stopped (the process writing it went away); back to queued",
                        row["id"], row["status"])
            recovered += 1
    return recovered


def staged_source(staging: Staging, image_id: str) -> Callable[[], Any]:
    def open_staged() -> Any:
        try:
            return staging.open(image_id)
        except DataNotFound as error:
            raise ImageError(409, str(error)) from None

    return open_staged
