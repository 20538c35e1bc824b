"""A small HTTP client for functional tests against a running server."""

from __future__ import annotations

from typing import Any

import requests


class ApiClient:
    """Requests against ``base_url`` with default headers (token, version)."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self._session = requests.Session()

    def with_headers(self, **headers: str) -> ApiClient:
        """A client sharing this one's base URL with extra/replaced headers.

        Keyword names use underscores for dashes: ``X_Auth_Token="demo"``.
        """
        merged = dict(self.headers)
        for name, value in headers.items():
            key = name.replace("_", "-")
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return ApiClient(self.base_url, merged)

    def request(self, method: str, path: str, *, json: Any = None, data: Any = None,
                headers: dict[str, str] | None = None, **kwargs: Any) -> requests.Response:
        merged = dict(self.headers)
        merged.update(headers or {})
        return self._session.request(
            method, self.base_url + path, json=json, data=data, headers=merged, timeout=60, **kwargs
        )

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, json=json, **kwargs)

    def put(self, path: str, json: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, json=json, **kwargs)

    def patch(self, path: str, json: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("PATCH", path, json=json, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    def close(self) -> None:
        self._session.close()
