"""Image data: ``PUT``/``GET /v2/images/{image_id}/file`` and ``PUT .../stage``.

Uploads stream from the client to the store (the server declares these
routes as streamed, so no layer buffers the body); downloads stream from
the store to the client, whole or one byte range.
"""

from __future__ import annotations

import logging
from typing import IO, Any

import falcon
import webob.byterange

from corral.core.front_http import ClientDisconnected
from corral.core.http import Route, send_empty
from corral.image.api import common
from corral.image.api.state import ImageState
from corral.image.data import Writer
from corral.image.domain.images import ImageError

LOG = logging.getLogger(__name__)

OCTET_STREAM = "application/octet-stream"


def writer(state: ImageState) -> Writer:
    return Writer(state.db, state.store, state.staging, state.conf)


def _check_content_type(req: falcon.Request) -> None:
    content_type = (req.content_type or "").split(";")[0].strip().lower()
    if content_type != OCTET_STREAM:
        raise common.fail(415, f"Invalid content type {req.content_type or 'None'}")


def _check_formats(image: dict[str, Any]) -> None:
    missing = [name for name in ("disk_format", "container_format") if not image[name]]
    if len(missing) == 2:
        raise common.fail(400, "Properties disk_format, container_format must be set prior to saving data.")
    if missing:
        raise common.fail(400, f"Property {missing[0]} must be set prior to saving data.")


def _declared_size(req: falcon.Request) -> int | None:
    header = req.get_header("x-openstack-image-size")
    try:
        if header is not None:
            return int(header)
        return req.content_length or None
    except (ValueError, TypeError):
        raise common.fail(400, "Invalid or missing image size in request headers.") from None


def _source(req: falcon.Request) -> IO[bytes]:
    """The body as it arrives: bounded by its length, or chunked as the server decoded it."""
    if req.content_length is not None:
        return req.bounded_stream  # type: ignore[no-any-return]
    if (req.get_header("Transfer-Encoding") or "").lower() == "chunked":
        if not req.env.get("wsgi.input_terminated"):
            raise common.fail(411, "A Content-Length header is required for this request.")
        return req.stream  # type: ignore[no-any-return]
    return req.bounded_stream  # type: ignore[no-any-return]


def upload(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    _check_content_type(req)
    size = _declared_size(req)
    image = common.find_image(state, req, image_id)
    common.enforce(state, req, "upload_image", image)
    if image["status"] != "queued":
        raise common.fail(409, f"Image status transition from {image['status']} to saving is not allowed")
    _check_formats(image)
    _receive(writer(state).upload, image, _source(req), size, req.get_header("Content-MD5"))
    send_empty(resp)


def _receive(work: Any, image: dict[str, Any], *args: Any) -> None:
    """Take the image's data; a client that went away mid-way left the image queued and gets a 400."""
    try:
        common.run(work, image, *args)
    except ClientDisconnected as error:
        LOG.info("image %s: the client stopped sending its data (%s); the image stays queued", image["id"], error)
        raise common.fail(400, "The request body did not arrive whole: the image data is incomplete.") from None


def stage(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    if "glance-direct" not in state.conf.enabled_import_methods:
        raise common.fail(404, "'glance-direct' method is not available at this site.")
    _check_content_type(req)
    size = _declared_size(req)
    image = common.find_image(state, req, image_id)
    common.enforce(state, req, "modify_image", image)
    if image["status"] != "queued":
        raise common.fail(409, f"Image status transition from {image['status']} to uploading is not allowed")
    _receive(writer(state).stage, image, _source(req), size)
    send_empty(resp)


def download(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    image = common.find_image(state, req, image_id)
    if image["status"] == "deactivated" and not common.viewer(state, req).is_admin:
        raise common.fail(403, "The requested image has been deactivated. Image data download is forbidden.")
    common.enforce(state, req, "download_image", image)
    if not image["location"]:
        send_empty(resp)
        return
    size = image["size"] or 0
    offset, length, content_range = common.run(byte_range, req, size)
    try:
        chunks = state.store.open(image["location"], offset, length)
    except Exception as error:  # noqa: BLE001 - the data is gone or unreachable: Glance answers 204
        LOG.warning("image %s: cannot read its data: %s", image_id, error)
        send_empty(resp)
        return
    resp.status = 206 if content_range else 200
    resp.content_type = OCTET_STREAM
    if content_range:
        resp.set_header("Content-Range", content_range)
    if image["checksum"]:
        resp.set_header("Content-MD5", image["checksum"])
    resp.content_length = length if length is not None else size
    resp.stream = _Closing(chunks)


class _Closing:
    """The store's chunks as a WSGI body whose close() releases the store's file."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = chunks

    def __iter__(self) -> Any:
        return iter(self._chunks)

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


def byte_range(req: falcon.Request, size: int) -> tuple[int, int | None, str | None]:
    """(offset, length or None for all, Content-Range or None) as Glance reads Range (one range only)."""
    header = req.get_header("Range")
    if header is not None:
        if "," in header:
            raise ImageError(400, "Requests with multiple ranges are not supported in Glance. You may make "
                                  "multiple single-range requests instead.")
        parsed = webob.byterange.Range.parse(header)
        if parsed is None:
            raise ImageError(416, "Invalid Range header.", as_detail=True)
        if parsed.start >= size:
            raise ImageError(416, "Invalid start position in Range header. Start position MUST be in the "
                                  f"inclusive range [0, {size - 1}].", as_detail=True)
        start = parsed.start if parsed.start >= 0 else max(0, size + parsed.start)
        end = parsed.end if parsed.end is not None and parsed.end < size else size
        return start, end - start, f"bytes {start}-{end - 1}/{size}"
    header = req.get_header("Content-Range")
    if header is not None:
        parsed = webob.byterange.ContentRange.parse(header)
        if parsed is None:
            raise ImageError(416, "Invalid Content-Range header.", as_detail=True)
        if parsed.length is None and parsed.stop > size:
            raise ImageError(416, "Invalid stop position in Content-Range header. The stop position MUST be in "
                                  f"the inclusive range [0, {size - 1}].", as_detail=True)
        if parsed.start >= size:
            raise ImageError(416, "Invalid start position in Content-Range header. Start position MUST be in the "
                                  f"inclusive range [0, {size - 1}].", as_detail=True)
        return parsed.start, parsed.stop - parsed.start, f"bytes {parsed.start}-{parsed.stop - 1}/{size}"
    return 0, None, None


ROUTES = [
    Route("/v2/images/{image_id}/file", {"PUT": upload, "GET": download}),
    Route("/v2/images/{image_id}/stage", {"PUT": stage}),
]

# Routes whose request bodies are image data: streamed to the handler, never buffered.
STREAMED_BODIES = (("PUT", r"/v2/images/[^/]+/(file|stage)"),)
