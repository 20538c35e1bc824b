"""Commands to the agent running in the node's ramdisk (its REST API at the heartbeat's callback URL).

``POST {callback_url}/v1/commands/?wait=<bool>&agent_token=<token>`` runs
a command (``standby.prepare_image``, ``clean.execute_clean_step`` ...);
asynchronous commands are followed with ``GET {callback_url}/v1/commands/``.
The token travels in the query string, as the agent expects, so this
client uses http.client directly: nothing here logs a URL.
"""

from __future__ import annotations

import http.client
import json
import time
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from corral.baremetal.drivers.base import DriverError


class AgentCommandError(DriverError):
    """The agent could not be reached or answered with an error."""


class AgentClient:
    def __init__(self, callback_url: str, token: str | None, *, timeout: float, verify_ca: str | None = None) -> None:
        parts = urlsplit(callback_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AgentCommandError(f"Invalid agent callback URL {callback_url!r}")
        self._parts = parts
        self._token = token
        self._timeout = timeout
        self._verify_ca = verify_ca

    def _connection(self) -> http.client.HTTPConnection:
        host, port = self._parts.hostname, self._parts.port
        if self._parts.scheme == "https":
            # The agent's self-generated certificate, sent in its heartbeat, is the only one trusted.
            context = ssl.create_default_context(cadata=self._verify_ca) if self._verify_ca else (
                ssl.create_default_context())
            context.check_hostname = False
            return http.client.HTTPSConnection(host, port, timeout=self._timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=self._timeout)

    def _request(self, method: str, query: Mapping[str, str], body: Any = None) -> Any:
        params = dict(query)
        if self._token:
            params["agent_token"] = self._token
        path = self._parts.path.rstrip("/") + "/v1/commands/"
        if params:
            path += "?" + urlencode(params)
        connection = self._connection()
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise AgentCommandError(f"Error contacting the agent: {error}") from None
        finally:
            connection.close()
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            raise AgentCommandError(f"The agent answered {response.status} with a body that is not JSON") from None
        if response.status >= 400:
            message = decoded.get("faultstring") or decoded.get("message") or decoded.get("details") or decoded
            raise AgentCommandError(f"Agent returned error for command: {response.status} {message}")
        return decoded

    def run(self, name: str, params: Mapping[str, Any], *, wait: bool) -> dict[str, Any]:
        """Start a command; with ``wait`` return its finished result."""
        result = self._request("POST", {"wait": str(wait).lower()}, {"name": name, "params": dict(params)})
        if not isinstance(result, dict):
            raise AgentCommandError(f"Unexpected answer from the agent for {name}: {result!r}")
        if wait and result.get("command_status") == "FAILED":
            raise AgentCommandError(f"Agent command {name} failed: {result.get('command_error')}")
        return result

    def commands(self) -> list[dict[str, Any]]:
        """Every command the agent ran or runs, oldest first."""
        result = self._request("GET", {})
        return list(result.get("commands") or [])

    def last_command(self, name: str) -> dict[str, Any] | None:
        """The latest run of ``name`` ("standby.prepare_image"; the agent records it as "prepare_image")."""
        short = name.rsplit(".", 1)[-1]
        matching = [command for command in self.commands() if command.get("command_name") == short]
        return matching[-1] if matching else None

    # ------------------------------------------------------------ commands

    def get_clean_steps(self, node: Mapping[str, Any], ports: list[dict[str, Any]]) -> dict[str, Any]:
        return self.run("clean.get_clean_steps", {"node": dict(node), "ports": ports}, wait=True)

    def execute_clean_step(self, step: Mapping[str, Any], node: Mapping[str, Any], ports: list[dict[str, Any]],
                           clean_version: Any) -> dict[str, Any]:
        return self.run("clean.execute_clean_step", {"step": dict(step), "node": dict(node), "ports": ports,
                                                     "clean_version": clean_version}, wait=False)

    def prepare_image(self, image_info: Mapping[str, Any], configdrive: Any = None) -> dict[str, Any]:
        params: dict[str, Any] = {"image_info": dict(image_info)}
        if configdrive is not None:
            params["configdrive"] = configdrive
        return self.run("standby.prepare_image", params, wait=False)

    def sync(self) -> dict[str, Any]:
        return self.run("standby.sync", {}, wait=True)

    def get_partition_uuids(self) -> dict[str, Any]:
        """What the agent wrote: ``root uuid`` (a partition image's root file system, or the disk identifier),
        ``efi system partition uuid``, ``partitions``."""
        return dict(self.run("standby.get_partition_uuids", {}, wait=True).get("command_result") or {})

    def install_bootloader(self, params: Mapping[str, Any], *, attempts: int, interval: float) -> dict[str, Any]:
        """Run ``image.install_bootloader`` and wait for its end, reading its status ``attempts`` times at most (it
        may take longer than one request should wait, as upstream polls it); its final record, FAILED or not."""
        result = self.run("image.install_bootloader", params, wait=False)
        for _ in range(attempts):
            if result.get("command_status") != "RUNNING":
                return result
            time.sleep(interval)
            result = self.last_command("image.install_bootloader") or result
        raise AgentCommandError(f"The agent did not finish installing the boot loader after {attempts} checks")

    def power_off(self) -> dict[str, Any]:
        return self.run("standby.power_off", {}, wait=False)

    def finalize_rescue(self, hashed_password: str | None) -> dict[str, Any]:
        """Hand the agent the rescue password's hash; the agent then stops serving its API."""
        return self.run("rescue.finalize_rescue", {"rescue_password": hashed_password, "hashed": True}, wait=True)
