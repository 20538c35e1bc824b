"""The Ironic virt driver: servers deployed onto bare metal nodes of a Bare Metal API.

``[DEFAULT] compute_driver = ironic.IronicDriver``. The driver talks to
Corral's own Bare Metal service or to an upstream Ironic, over HTTP only
(``[ironic]``: keystoneauth-style options, ``endpoint_override``...), and
behaves as upstream Nova's ironic driver:

* every node with a ``resource_class`` is one hypervisor (its name is the
  node's UUID) and one Placement provider with one unit of
  ``CUSTOM_<RESOURCE_CLASS>``, reserved while the node cannot take a
  server (maintenance, no usable power state, not ``available``, or
  associated with an instance), and the node's traits;
* spawn associates the node with the server (``instance_uuid``), fills
  its ``instance_info`` (image, root size, capabilities, traits, display
  name, project...), attaches the server's VIFs, validates the node,
  provisions it ``active`` with a config drive when one is asked for or
  forced, and follows the node until it is active or failed; a failed
  deploy undeploys the node and frees it before the error is raised;
* destroy undeploys (``deleted``) and waits for the node to leave its
  deployed states; stop/start/reboot are power actions, rebuild the
  ``rebuild`` target with a new config drive, rescue/unrescue the
  ``rescue`` / ``unrescue`` targets;
* with ``[ironic] peer_list`` the nodes are spread over the compute
  services named there that are up by a consistent hash ring (see
  :func:`nodes_for_host`): the free nodes of a peer that stops are taken
  over by the others at their next refresh, those carrying its servers
  stay its own (see :meth:`IronicDriver.refresh_nodes`); ``conductor_group``
  (``partition_key``) and ``shard`` restrict the nodes this service
  looks at.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from oslo_config import cfg

from corral.core import configdrive
from corral.core.service_client import ServiceClient, ServiceUnavailable, client_opts, register_client_opts
from corral.compute.domain import states
from corral.compute.virt.driver import ComputeDriver, InstanceInfo, InstanceNotFound, NodeResources, VirtDriverError

LOG = logging.getLogger(__name__)

# The Bare Metal API version the driver asks for when the server has it:
# shards (1.82) and everything before it. The version is negotiated, as
# upstream's SDK negotiates it: the lower of this and the server's maximum,
# which must reach MIN_API_VERSION (conductor groups 1.46, VIFs 1.28,
# rescue 1.38, upstream Nova's floor too); shards need 1.82.
API_VERSION = "1.82"
MIN_API_VERSION = "1.46"
SHARD_API_VERSION = "1.82"
VERSION_HEADER = "X-OpenStack-Ironic-API-Version"
MAX_VERSION_HEADER = "X-OpenStack-Ironic-API-Maximum-Version"

IRONIC_OPTS = [
    cfg.IntOpt("api_max_retries", default=60, min=0,
               help="Times a Bare Metal request refused because the node is locked (409) is retried, and "
               "polls of a node being undeployed before giving up."),
    cfg.FloatOpt("api_retry_interval", default=2.0, min=0.01,
                 help="Seconds between those retries, and between the polls of a node being deployed."),
    cfg.StrOpt("conductor_group",
               help="Only nodes of this conductor group are this service's (upstream's partition_key "
               "names the same thing)."),
    cfg.StrOpt("partition_key",
               help="Conductor group whose nodes this service manages, shared with the compute services "
               "of peer_list."),
    cfg.ListOpt("peer_list", default=[],
                help="Compute service hosts (this one included) that share the nodes: each node is managed "
                "by one of them, chosen by a consistent hash ring over the list."),
    cfg.StrOpt("shard", help="Only nodes of this shard are this service's (Bare Metal API 1.82)."),
    cfg.IntOpt("serial_console_state_timeout", default=10, min=0,
               help="Seconds to wait for a node's console to change state (kept for upstream configurations)."),
]

# Node provision states (Ironic's names).
AVAILABLE = "available"
ACTIVE = "active"
DEPLOYFAIL = "deploy failed"
ERROR = "error"
RESCUE = "rescue"
RESCUEFAIL = "rescue failed"
UNRESCUEFAIL = "unrescue failed"
# Where an undeploy may be asked from (upstream's _UNPROVISION_STATES); and where it is over for Compute.
UNDEPLOYABLE = frozenset({ACTIVE, DEPLOYFAIL, ERROR, "deploying", "wait call-back", "deploy hold", RESCUE,
                          RESCUEFAIL, UNRESCUEFAIL, "rescue wait", "rescuing", "unrescuing", "servicing",
                          "service wait", "service failed", "service hold"})
UNDEPLOYED = frozenset({"cleaning", "clean wait", "clean failed", AVAILABLE, "manageable"})

# Node power states -> the server's power states.
POWER_STATES = {"power on": states.RUNNING, "power off": states.SHUTDOWN}

# The traits every node's provider carries (upstream adds the same).
NODE_TRAITS = frozenset({"COMPUTE_NODE", "OWNER_NOVA"})

HASH_RING_REPLICAS = 32


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_client_opts(conf, "ironic", client_opts("Bare Metal", "/baremetal", retries=3))
    register_client_opts(conf, "ironic", IRONIC_OPTS)


def resource_class_name(resource_class: str) -> str:
    """Upstream's normalisation: CUSTOM_ + upper case, anything not alphanumeric becomes _."""
    cleaned = "".join(c if c.isalnum() else "_" for c in resource_class.upper())
    return cleaned if cleaned.startswith("CUSTOM_") else f"CUSTOM_{cleaned}"


def node_reserved(node: dict[str, Any]) -> bool:
    """Whether the node's unit is out of the scheduler's reach (upstream's unavailable or used)."""
    return bool(
        node.get("maintenance")
        or node.get("power_state") in (None, "error")
        or node.get("provision_state") != AVAILABLE
        or node.get("instance_uuid")
    )


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def negotiate_version(server_max: str | None, shard: bool = False) -> str:
    """The API version to ask a server whose maximum is ``server_max`` for (None: it sent none)."""
    if not server_max:
        return API_VERSION
    try:
        maximum = _version(server_max)
    except ValueError:
        return API_VERSION
    if maximum < _version(MIN_API_VERSION):
        raise BareMetalError(f"The Bare Metal API supports versions up to {server_max}; the ironic driver needs "
                             f"{MIN_API_VERSION} or later.", code=406)
    if shard and maximum < _version(SHARD_API_VERSION):
        raise BareMetalError(f"[ironic] shard needs Bare Metal API {SHARD_API_VERSION}; the server supports versions "
                             f"up to {server_max}.", code=406)
    return API_VERSION if maximum >= _version(API_VERSION) else f"{maximum[0]}.{maximum[1]}"


def _ring_position(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode(), usedforsecurity=False).digest()[:8], "big")


def nodes_for_host(host: str, peers: Iterable[str], node_uuids: Iterable[str]) -> list[str]:
    """The nodes a consistent hash ring over ``peers`` gives to ``host`` (all of them without peers)."""
    members = sorted(set(peers) | {host})
    if len(members) == 1:
        return sorted(node_uuids)
    ring = sorted((_ring_position(f"{member}-{replica}"), member)
                  for member in members for replica in range(HASH_RING_REPLICAS))
    positions = [position for position, _member in ring]
    mine = []
    for uuid in node_uuids:
        index = bisect.bisect(positions, _ring_position(uuid)) % len(ring)
        if ring[index][1] == host:
            mine.append(uuid)
    return sorted(mine)


class BareMetalError(VirtDriverError):
    """The Bare Metal API refused a request."""


class BareMetalClient:
    """The few Bare Metal API calls the driver makes, at the version negotiated with the server."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf
        self._client = ServiceClient(conf, "ironic", "/baremetal")
        self._version: str | None = None

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    @property
    def version(self) -> str:
        """Negotiated on first use from the maximum the server's ``/v1`` announces."""
        if self._version is None:
            try:
                response = self._client.call("GET", "/v1")
            except ServiceUnavailable as error:
                raise BareMetalError(f"The Bare Metal API cannot be reached: {error}", code=503) from error
            if response.status_code != 200:
                raise BareMetalError(f"GET /v1 answered {response.status_code}: {_error_message(response)}",
                                     code=response.status_code)
            self._version = negotiate_version(response.headers.get(MAX_VERSION_HEADER),
                                              shard=bool(self._conf.ironic.shard))
            LOG.info("Bare Metal API at %s: version %s", self.endpoint, self._version)
        return self._version

    def call(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        """One request; a node locked by a conductor (409 "locked") is retried as upstream retries it."""
        options = self._conf.ironic
        attempts = 0
        while True:
            try:
                response = self._client.call(method, path, headers={VERSION_HEADER: self.version}, **kwargs)
            except ServiceUnavailable as error:
                raise BareMetalError(f"The Bare Metal API cannot be reached: {error}", code=503) from error
            if response.status_code in expect:
                return response.json() if response.content else None
            message = _error_message(response)
            if response.status_code == 409 and "locked" in message.lower() and attempts < options.api_max_retries:
                attempts += 1
                time.sleep(options.api_retry_interval)
                continue
            raise BareMetalError(f"{method} {path} answered {response.status_code}: {message}",
                                 code=response.status_code)

    def nodes(self, **filters: str) -> list[dict[str, Any]]:
        """Every node (detailed) the filters match, following the API's pages."""
        found: list[dict[str, Any]] = []
        params: dict[str, str] = {**filters, "detail": "True", "limit": "1000"}
        while True:
            body = self.call("GET", "/v1/nodes", params=params)
            page = body.get("nodes") or []
            found.extend(page)
            if not body.get("next") or not page:
                return found
            params = {**filters, "detail": "True", "limit": "1000", "marker": page[-1]["uuid"]}

    def node(self, node_uuid: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/v1/nodes/{node_uuid}"))

    def node_of(self, instance_uuid: str) -> dict[str, Any] | None:
        nodes = self.call("GET", "/v1/nodes", params={"instance_uuid": instance_uuid, "detail": "True"})["nodes"]
        return nodes[0] if nodes else None

    def patch(self, node_uuid: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(self.call("PATCH", f"/v1/nodes/{node_uuid}", json=operations))

    def provision(self, node_uuid: str, target: str, **extra: Any) -> None:
        self.call("PUT", f"/v1/nodes/{node_uuid}/states/provision", json={"target": target, **extra},
                  expect=(202,))

    def power(self, node_uuid: str, target: str, timeout: int | None = None) -> None:
        body: dict[str, Any] = {"target": target}
        if timeout:
            body["timeout"] = timeout
        self.call("PUT", f"/v1/nodes/{node_uuid}/states/power", json=body, expect=(202,))

    def validate(self, node_uuid: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/v1/nodes/{node_uuid}/validate"))

    def attach_vif(self, node_uuid: str, vif_id: str) -> None:
        try:
            self.call("POST", f"/v1/nodes/{node_uuid}/vifs", json={"id": vif_id}, expect=(204,))
        except BareMetalError as error:
            if error.code != 409:  # already attached
                raise

    def detach_vif(self, node_uuid: str, vif_id: str) -> None:
        try:
            self.call("DELETE", f"/v1/nodes/{node_uuid}/vifs/{vif_id}", expect=(204,))
        except BareMetalError as error:
            if error.code not in (400, 404):
                raise


def _error_message(response: Any) -> str:
    """The faultstring of an Ironic error body (its JSON-in-JSON), or the text."""
    try:
        body = response.json()
        inner = body.get("error_message", body) if isinstance(body, dict) else body
        if isinstance(inner, str):
            inner = orjson.loads(inner)
        if isinstance(inner, dict):
            return str(inner.get("faultstring") or inner.get("description") or inner)
    except ValueError:
        pass
    return response.text[:500]


class IronicDriver(ComputeDriver):
    hypervisor_type = "ironic"
    # An undeploy takes long and may fail: the claim stays until the node is back.
    destroy_before_delete = True
    capabilities = {"supports_console_log": False, "supports_snapshot": False, "supports_rebuild": True}

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        register_opts(conf)
        self.client = BareMetalClient(conf)
        self.host = conf.host
        # node uuid -> the node as last read; the nodes of this service only.
        self._nodes: dict[str, dict[str, Any]] = {}
        # Compute hosts seen up (None: not told yet; the whole peer_list counts).
        self._live_peers: set[str] | None = None
        # Which of the servers named are this host's (None: not told; the ring alone decides).
        self._own_instances: Callable[[list[str]], set[str]] | None = None
        self._lock = threading.Lock()

    # -------------------------------------------------------------- the host

    def init_host(self, host: str) -> None:
        self.host = host

    def _filters(self) -> dict[str, str]:
        options = self.conf.ironic
        filters: dict[str, str] = {}
        group = options.partition_key or options.conductor_group
        if group is not None:
            filters["conductor_group"] = group
        if options.shard:
            filters["shard"] = options.shard
        return filters

    def set_live_peers(self, hosts: list[str]) -> None:
        self._live_peers = set(hosts)

    def set_instance_filter(self, own: Callable[[list[str]], set[str]]) -> None:
        self._own_instances = own

    def ring_members(self) -> list[str]:
        """The peer_list hosts whose compute services are up, and this one: a dead peer's nodes are taken over."""
        peers = set(self.conf.ironic.peer_list)
        if self._live_peers is not None:
            peers &= self._live_peers
        return sorted(peers | {self.host})

    def refresh_nodes(self) -> None:
        """This host's nodes, by upstream's rules (``_refresh_cache``).

        A node carrying one of this host's servers is this host's; a free
        node is the hash ring's choice; a node carrying another host's
        server is never this host's, even while that host is down: its
        servers stay with their host (``host_status`` UNKNOWN) until it is
        back, and only the free nodes are taken over.
        """
        nodes = [node for node in self.client.nodes(**self._filters()) if node.get("resource_class")]
        ring = set(nodes_for_host(self.host, self.ring_members(), [node["uuid"] for node in nodes]))
        carried = [node["instance_uuid"] for node in nodes if node.get("instance_uuid")]
        # Read after the nodes (upstream's order): a server placed meanwhile is not missed.
        own = self._own_instances(carried) if self._own_instances is not None and carried else None

        def is_mine(node: dict[str, Any]) -> bool:
            if own is None or not node.get("instance_uuid"):
                return node["uuid"] in ring
            return node["instance_uuid"] in own

        mine = {node["uuid"] for node in nodes if is_mine(node)}
        with self._lock:
            self._nodes = {node["uuid"]: node for node in nodes if node["uuid"] in mine}

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        if refresh or not self._nodes:
            self.refresh_nodes()
        with self._lock:
            return sorted(self._nodes)

    def _cached(self, node_uuid: str) -> dict[str, Any]:
        with self._lock:
            node = self._nodes.get(node_uuid)
        if node is None:
            node = self.client.node(node_uuid)
            self._remember(node)
        return node

    def _remember(self, node: dict[str, Any]) -> None:
        with self._lock:
            if node["uuid"] in self._nodes or node.get("resource_class"):
                self._nodes[node["uuid"]] = node

    def node_resources(self, nodename: str) -> NodeResources:
        node = self._cached(nodename)
        resource_class = node.get("resource_class")
        if not resource_class:
            raise VirtDriverError(f"Node {nodename} has no resource class.")
        properties = node.get("properties") or {}
        inventory = {"total": 1, "reserved": 1 if node_reserved(node) else 0, "min_unit": 1, "max_unit": 1,
                     "step_size": 1, "allocation_ratio": 1.0}
        return NodeResources(
            nodename=nodename, hypervisor_type=self.hypervisor_type, hypervisor_version=1, cpu_info="",
            # Upstream reports no VCPU, MEMORY_MB or DISK_GB for bare metal: the node is one unit.
            vcpus=0, memory_mb=0, local_gb=0,
            inventories={resource_class_name(resource_class): inventory},
            traits=frozenset(node.get("traits") or []) | NODE_TRAITS,
            extra={"uuid": nodename, "cpu_arch": properties.get("cpu_arch"), "node_name": node.get("name")},
        )

    def list_instance_uuids(self) -> list[str]:
        with self._lock:
            return [node["instance_uuid"] for node in self._nodes.values() if node.get("instance_uuid")]

    # ------------------------------------------------------------ the guests

    def _node_of(self, instance: dict[str, Any]) -> dict[str, Any]:
        node = self.client.node_of(instance["uuid"])
        if node is None:
            raise InstanceNotFound(instance["uuid"])
        self._remember(node)
        return node

    def _wait(self, node_uuid: str, done: Callable[[dict[str, Any]], bool], *,
              limit: int | None = None) -> dict[str, Any]:
        """Poll the node every api_retry_interval until ``done`` (at most ``limit`` polls when given)."""
        polls = 0
        while True:
            node = self.client.node(node_uuid)
            self._remember(node)
            if done(node):
                return node
            polls += 1
            if limit is not None and polls > limit:
                raise VirtDriverError(f"Node {node_uuid} did not reach the expected state in time: provision "
                                      f"state {node.get('provision_state')}, power state {node.get('power_state')}.")
            time.sleep(self.conf.ironic.api_retry_interval)

    def _instance_info(self, instance: dict[str, Any], image: dict[str, Any]) -> dict[str, Any]:
        flavor = instance.get("flavor") or {}
        extra_specs = flavor.get("extra_specs") or {}
        capabilities = {key.split(":", 1)[1]: value for key, value in extra_specs.items()
                        if key.startswith("capabilities:")}
        traits = sorted({key.split(":", 1)[1] for key, value in extra_specs.items()
                         if key.startswith("trait:") and value == "required"}
                        | set((image.get("traits_required") or [])))
        info: dict[str, Any] = {
            "image_source": image.get("id") or instance.get("image_ref") or "",
            "root_gb": str(instance.get("root_gb") or 0),
            "swap_mb": str(flavor.get("swap") or 0),
            "display_name": instance.get("display_name") or "",
            "vcpus": str(instance.get("vcpus") or 0),
            "memory_mb": str(instance.get("memory_mb") or 0),
            "local_gb": str(instance.get("root_gb") or 0),
            "nova_host_id": self.host,
            "project_id": instance.get("project_id") or "",
            "user_id": instance.get("user_id") or "",
            "flavor_name": flavor.get("name") or "",
            "fixed_ips": [],
            "floating_ips": [],
        }
        if instance.get("ephemeral_gb"):
            info["ephemeral_gb"] = str(instance["ephemeral_gb"])
        if capabilities:
            info["capabilities"] = orjson.dumps(capabilities).decode()
        if traits:
            info["traits"] = traits
        # The image's facts Ironic would look up itself, when the image service gave them.
        for key, value in (("image_checksum", image.get("checksum")), ("image_os_hash_algo", image.get("os_hash_algo")),
                           ("image_os_hash_value", image.get("os_hash_value")),
                           ("image_disk_format", image.get("disk_format")),
                           ("image_container_format", image.get("container_format"))):
            if value:
                info[key] = value
        return info

    def _config_drive(self, instance: dict[str, Any], image: dict[str, Any], network_info: list[Any],
                      user_data: str | None, config_drive: bool) -> str | None:
        """The gzip+base64 ISO config drive, when asked, forced or mandatory for the image; else None."""
        wanted = (config_drive or self.conf.force_config_drive
                  or (image.get("img_config_drive") == "mandatory"))
        if not wanted:
            return None
        key_name, key_data = instance.get("key_name"), instance.get("key_data")
        meta_data: dict[str, Any] = {
            "uuid": instance["uuid"],
            "name": instance.get("display_name") or "",
            "hostname": instance.get("hostname") or "",
            "launch_index": instance.get("launch_index") or 0,
            "availability_zone": instance.get("availability_zone"),
            "project_id": instance.get("project_id"),
            "meta": dict(instance.get("metadata") or {}),
            "files": [],
            "devices": [],
        }
        if key_name and key_data:
            meta_data["public_keys"] = {key_name: key_data}
            key_type = "x509" if key_data.lstrip().startswith("-----BEGIN") else "ssh"
            meta_data["keys"] = [{"name": key_name, "type": key_type, "data": key_data}]
        network_data = {"links": [], "networks": [], "services": []}
        user_bytes = _user_data(user_data)
        try:
            image_bytes = configdrive.build(meta_data, user_bytes, network_data)
        except configdrive.ConfigDriveError as error:
            raise VirtDriverError(f"Failed to build the config drive of instance {instance['uuid']}: {error}")
        return configdrive.encode(image_bytes)

    def spawn(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
              admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
              user_data: str | None = None, config_drive: bool = False) -> None:
        node_uuid = instance.get("node")
        if not node_uuid:
            raise VirtDriverError(f"Instance {instance['uuid']} has no node to be deployed on.")
        uuid = instance["uuid"]
        try:
            self.client.patch(node_uuid, [{"op": "add", "path": "/instance_uuid", "value": uuid}])
        except BareMetalError as error:
            raise VirtDriverError(f"Node {node_uuid} cannot take instance {uuid}: {error}", code=error.code) from None
        try:
            self._deploy(node_uuid, instance, image, network_info, user_data, config_drive)
        except Exception:
            self._cleanup_deploy(node_uuid, instance, network_info)
            raise

    def _deploy(self, node_uuid: str, instance: dict[str, Any], image: dict[str, Any], network_info: list[Any],
                user_data: str | None, config_drive: bool) -> None:
        uuid = instance["uuid"]
        info = self._instance_info(instance, image)
        self.client.patch(node_uuid, [{"op": "add", "path": f"/instance_info/{key}", "value": value}
                                      for key, value in info.items()])
        for vif in network_info:
            self.client.attach_vif(node_uuid, str(vif["id"]))
        self._validate(node_uuid, uuid)
        drive = self._config_drive(instance, image, network_info, user_data, config_drive)
        extra = {"configdrive": drive} if drive else {}
        self.client.provision(node_uuid, "active", **extra)
        LOG.info("deploying instance %s on node %s", uuid, node_uuid)
        self._wait_for_deploy(node_uuid, uuid, ACTIVE, (DEPLOYFAIL, ERROR), "provision")

    def _validate(self, node_uuid: str, instance_uuid: str) -> None:
        results = self.client.validate(node_uuid)
        interfaces = ("deploy", "power", "storage")
        failed = [name for name in interfaces if (results.get(name) or {}).get("result") is False]
        if failed:
            reasons = ", ".join(f"{name}: {(results.get(name) or {}).get('reason')}" for name in interfaces)
            raise VirtDriverError(f"Ironic node: {node_uuid} failed to validate. ({reasons})")

    def _wait_for_deploy(self, node_uuid: str, instance_uuid: str, goal: str, failures: tuple[str, ...],
                         verb: str) -> dict[str, Any]:
        def done(node: dict[str, Any]) -> bool:
            state = node.get("provision_state")
            if node.get("instance_uuid") != instance_uuid:
                raise VirtDriverError(f"Failed to {verb} instance {instance_uuid}: node {node_uuid} no longer "
                                      "carries it.")
            if state in failures:
                raise VirtDriverError(f"Failed to {verb} instance {instance_uuid}: {node.get('last_error')}")
            return bool(state == goal and node.get("target_provision_state") is None)

        return self._wait(node_uuid, done)

    def _cleanup_deploy(self, node_uuid: str, instance: dict[str, Any], network_info: list[Any]) -> None:
        """After a failed spawn: undeploy the node if it got that far, then free it (upstream's _cleanup_deploy)."""
        try:
            node = self.client.node(node_uuid)
            if node.get("instance_uuid") not in (None, instance["uuid"]):
                return
            if node.get("provision_state") in UNDEPLOYABLE:
                self._undeploy(node_uuid)
            for vif in network_info:
                self.client.detach_vif(node_uuid, str(vif["id"]))
            node = self.client.node(node_uuid)
            if node.get("instance_uuid") == instance["uuid"]:
                self.client.patch(node_uuid, [{"op": "remove", "path": "/instance_info"},
                                              {"op": "remove", "path": "/instance_uuid"}])
            self._remember(self.client.node(node_uuid))
        except Exception as error:  # noqa: BLE001 - the deploy's own error is what the server shows
            LOG.warning("node %s not cleaned up after the failed deploy of %s: %s", node_uuid, instance["uuid"], error)

    def _undeploy(self, node_uuid: str) -> None:
        self.client.provision(node_uuid, "deleted")
        try:
            self._wait(node_uuid,
                       lambda node: node.get("provision_state") in UNDEPLOYED or not node.get("instance_uuid"),
                       limit=self.conf.ironic.api_max_retries)
        except VirtDriverError:
            state = self.client.node(node_uuid).get("provision_state")
            raise VirtDriverError(f"Error destroying the instance on node {node_uuid}. Provision state still "
                                  f"'{state}'.") from None

    def destroy(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None,
                destroy_disks: bool = True) -> None:
        node = self.client.node_of(instance["uuid"])
        if node is None:
            return
        node_uuid = node["uuid"]
        if node.get("provision_state") in UNDEPLOYABLE:
            self._undeploy(node_uuid)
        # Then, as upstream's _cleanup_deploy: the VIFs unplugged (an undeploy leaves them attached on
        # upstream Ironic) and, when the node never got deployed, its instance_info and instance_uuid cleared.
        for vif in network_info:
            self.client.detach_vif(node_uuid, str(vif["id"]))
        deployed = node.get("provision_state") in UNDEPLOYABLE
        if not deployed and self.client.node(node_uuid).get("instance_uuid") == instance["uuid"]:
            self.client.patch(node_uuid, [{"op": "remove", "path": "/instance_info"},
                                          {"op": "remove", "path": "/instance_uuid"}])
        self._remember(self.client.node(node_uuid))
        LOG.info("instance %s removed from node %s", instance["uuid"], node_uuid)

    def _set_power(self, instance: dict[str, Any], target: str, goal: str, timeout: int | None = None) -> None:
        node = self._node_of(instance)
        self.client.power(node["uuid"], target, timeout)
        polls = max(self.conf.ironic.api_max_retries, int((timeout or 0) / self.conf.ironic.api_retry_interval) + 1)
        self._wait(node["uuid"], lambda found: found.get("target_power_state") is None
                   and found.get("power_state") in (goal, "error"), limit=polls)
        final = self.client.node(node["uuid"])
        if final.get("power_state") != goal:
            raise VirtDriverError(f"Node {node['uuid']} did not reach {goal!r}: {final.get('last_error')}")

    def power_off(self, instance: dict[str, Any], timeout: int = 0, retry_interval: int = 0) -> None:
        if timeout:
            try:
                self._set_power(instance, "soft power off", "power off", timeout)
                return
            except VirtDriverError as error:
                if isinstance(error, InstanceNotFound):
                    raise
                LOG.info("soft power off of %s failed (%s); powering off", instance["uuid"], error)
        self._set_power(instance, "power off", "power off")

    def power_on(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None) -> None:
        self._set_power(instance, "power on", "power on")

    def reboot(self, instance: dict[str, Any], network_info: list[Any], reboot_type: str,
               block_device_info: Any = None) -> None:
        if reboot_type == "SOFT":
            try:
                self._set_power(instance, "soft rebooting", "power on")
                return
            except VirtDriverError as error:
                if isinstance(error, InstanceNotFound):
                    raise
                LOG.info("soft reboot of %s failed (%s); rebooting hard", instance["uuid"], error)
        self._set_power(instance, "rebooting", "power on")

    def rebuild(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
                admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
                user_data: str | None = None, config_drive: bool = False, preserve_ephemeral: bool = False) -> None:
        node = self._node_of(instance)
        node_uuid = node["uuid"]
        info = self._instance_info(instance, image)
        if preserve_ephemeral:
            info["preserve_ephemeral"] = "True"
        self.client.patch(node_uuid, [{"op": "add", "path": f"/instance_info/{key}", "value": value}
                                      for key, value in info.items()])
        drive = self._config_drive(instance, image, network_info, user_data, config_drive)
        self.client.provision(node_uuid, "rebuild", **({"configdrive": drive} if drive else {}))
        self._wait_for_deploy(node_uuid, instance["uuid"], ACTIVE, (DEPLOYFAIL, ERROR), "rebuild")

    def rescue(self, instance: dict[str, Any], network_info: list[Any], image: dict[str, Any],
               rescue_password: str | None, block_device_info: Any = None) -> None:
        node = self._node_of(instance)
        self.client.provision(node["uuid"], "rescue", rescue_password=rescue_password or "")
        self._wait_for_deploy(node["uuid"], instance["uuid"], RESCUE, (RESCUEFAIL, ERROR), "rescue")

    def unrescue(self, instance: dict[str, Any], network_info: list[Any]) -> None:
        node = self._node_of(instance)
        self.client.provision(node["uuid"], "unrescue")
        self._wait_for_deploy(node["uuid"], instance["uuid"], ACTIVE, (UNRESCUEFAIL, ERROR), "unrescue")

    def get_info(self, instance: dict[str, Any]) -> InstanceInfo:
        node = self._node_of(instance)
        return InstanceInfo(state=POWER_STATES.get(node.get("power_state") or "", states.NOSTATE))

    def get_console_output(self, instance: dict[str, Any]) -> str:
        raise NotImplementedError()


def _user_data(user_data: str | None) -> bytes | None:
    """The server's user data as the guest reads it (the API keeps it base64-encoded)."""
    if not user_data:
        return None
    import base64
    import binascii

    try:
        return base64.b64decode(user_data, validate=True)
    except (binascii.Error, ValueError):
        return user_data.encode()
