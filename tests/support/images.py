"""Images in the Image service of a running Corral (``corral serve`` tests boot from them)."""

from __future__ import annotations

from typing import Any

import requests


def active_image(image_url: str, headers: dict[str, str], data: bytes = b"\0" * 4096, **body: Any) -> dict[str, Any]:
    """An image created and uploaded through ``<image_url>/v2/images`` with ``headers``; its body once active."""
    created = requests.post(f"{image_url}/v2/images", headers=headers, timeout=30,
                            json={"disk_format": "raw", "container_format": "bare", **body})
    assert created.status_code == 201, created.text
    image_id = created.json()["id"]
    uploaded = requests.put(f"{image_url}/v2/images/{image_id}/file", data=data, timeout=30,
                            headers={**headers, "Content-Type": "application/octet-stream"})
    assert uploaded.status_code == 204, uploaded.text
    shown = requests.get(f"{image_url}/v2/images/{image_id}", headers={**headers, "Accept": "application/json"},
                         timeout=30).json()
    assert shown["status"] == "active", shown
    return shown  # type: ignore[no-any-return]
