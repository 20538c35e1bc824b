"""web-download: fetching an image from a URL without reaching what the cloud must keep private.

A URL must pass ``[import_filtering_opts]`` (Glance's option names:
allowed or disallowed schemes, hosts and ports).  Beyond Glance, the host
must also resolve only to public addresses: loopback, link-local,
private, shared (CGNAT), multicast and reserved addresses are refused
unless ``allowed_hosts`` names the host or ``allow_internal_addresses``
is set.  The check is made on the address each connection actually
reaches, before any byte of the request is sent (so a name that resolves
to a public address when checked and to an internal one when connecting
gains nothing), and again for every redirect.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import urllib.parse
from collections.abc import Iterator
from typing import IO, Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

CHUNK = 1024 * 1024


class Refused(Exception):
    """The URL does not pass the filtering rules."""


def _internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


class Filter:
    """``[import_filtering_opts]`` applied to URLs and to the addresses they lead to."""

    def __init__(self, opts: Any) -> None:
        self.opts = opts

    def _allowed(self, value: Any, allowed: list[Any], disallowed: list[Any]) -> bool:
        # As Glance: when both lists are set, only the allowed one counts.
        if allowed:
            return value in allowed
        return value not in disallowed

    def check_url(self, url: str) -> None:
        parsed = urllib.parse.urlparse(url)
        opts = self.opts
        try:
            port = parsed.port
        except ValueError:
            raise Refused(url) from None
        host = (parsed.hostname or "").lower()
        if not parsed.scheme or not self._allowed(parsed.scheme, opts.allowed_schemes, opts.disallowed_schemes):
            raise Refused(url)
        if not host or not self._allowed(host, [h.lower() for h in opts.allowed_hosts],
                                         [h.lower() for h in opts.disallowed_hosts]):
            raise Refused(url)
        if port and not self._allowed(port, opts.allowed_ports, opts.disallowed_ports):
            raise Refused(url)
        if not self._trusted(host):
            addresses = _resolve(host, port or 443)
            # (A name that does not resolve is refused too, as Glance refuses it.)
            if not addresses or any(_internal(address) for address in addresses):
                raise Refused(url)

    def _trusted(self, host: str) -> bool:
        return self.opts.allow_internal_addresses or host in [h.lower() for h in self.opts.allowed_hosts]

    def check_peer(self, host: str, address: str) -> None:
        if not self._trusted(host.lower()) and _internal(address):
            raise Refused(f"{host} resolves to an internal address")


def _resolve(host: str, port: int) -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})
    except socket.gaierror:
        return []


def _checked(connection_class: type[HTTPConnection], url_filter: Filter) -> type[HTTPConnection]:
    class Checked(connection_class):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            super().connect()
            peer = self.sock.getpeername()[0]
            try:
                url_filter.check_peer(self.host, peer)
            except Refused:
                self.sock.close()
                raise

    return Checked


class _FilteringAdapter(HTTPAdapter):
    def __init__(self, url_filter: Filter) -> None:
        self._filter = url_filter
        super().__init__(max_retries=0)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **kwargs)
        http_pool = type("Pool", (HTTPConnectionPool,), {"ConnectionCls": _checked(HTTPConnection, self._filter)})
        https_pool = type("Pool", (HTTPSConnectionPool,),
                          {"ConnectionCls": _checked(HTTPSConnection, self._filter)})
        self.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}


class _Body:
    """A response body as a file-like object (``read(n)``), erroring on a stall."""

    def __init__(self, response: requests.Response) -> None:
        self._raw = response.raw

    def read(self, size: int = -1) -> bytes:
        try:
            return self._raw.read(CHUNK if size is None or size < 0 else size, decode_content=False)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise OSError(f"reading the image failed: {error}") from None


@contextlib.contextmanager
def open_url(url: str, url_filter: Filter, timeout: float, max_redirects: int) -> Iterator[IO[bytes]]:
    """The body at ``url``, following redirects that pass the filter too."""
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: the filter must see the real peer
    adapter = _FilteringAdapter(url_filter)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    with session:
        for _ in range(max_redirects + 1):
            url_filter.check_url(url)
            response = session.get(url, stream=True, timeout=timeout, allow_redirects=False)
            if response.is_redirect:
                url = urllib.parse.urljoin(url, response.headers["Location"])
                response.close()
                continue
            with response:
                if response.status_code != 200:
                    raise OSError(f"{url} answered HTTP {response.status_code}")
                yield _Body(response)  # type: ignore[misc]
            return
        raise OSError(f"{url}: more than {max_redirects} redirects")
