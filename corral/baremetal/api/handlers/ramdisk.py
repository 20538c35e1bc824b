"""The agent's endpoints: GET /v1/lookup and POST /v1/heartbeat/{node} (1.22).

(``POST /v1/continue_inspection`` is in :mod:`corral.baremetal.api.handlers.inspection`.)

The deploy ramdisk's agent holds no Keystone token, so both routes are
public, as upstream's.  Lookup finds the node by its ports' MAC addresses
(or its UUID) only while an agent is expected (deploying, cleaning ...)
and hands out the node's agent token once; later lookups see "******".
A heartbeat carries the token back and tells the node's conductor where
the agent listens; the conductor checks the token and drives the work.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

import falcon
from oslo_utils import netutils, uuidutils

from corral.baremetal.api import common, links
from corral.baremetal.api.handlers import inspection
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import agent as agent_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states
from corral.core.errors import BadRequest, NotFound
from corral.core.http import Route, send_empty, send_json

LOG = logging.getLogger(__name__)

RAMDISK_VERSION = (1, 22)
AGENT_VERSION_VERSION = (1, 36)
AGENT_TOKEN_VERSION = (1, 62)
AGENT_VERIFY_CA_VERSION = (1, 68)
AGENT_STATUS_VERSION = (1, 72)

AGENT_VALID_STATES = ("start", "end", "error")
HEARTBEAT_FIELDS = frozenset(
    {"callback_url", "agent_version", "agent_token", "agent_verify_ca", "agent_status", "agent_status_message"}
)
# Upstream's LOOKUP_ALLOWED_STATES: an agent runs only while the node is in one of these.
LOOKUP_ALLOWED_STATES = frozenset(
    {
        states.DEPLOYING, states.DEPLOYWAIT, states.CLEANING, states.CLEANWAIT, states.INSPECTING,
        states.INSPECTWAIT, states.RESCUING, states.RESCUEWAIT, states.SERVICING, states.SERVICEWAIT,
    }
)
# With fast track an agent may run on while the node waits for its next use.
FAST_TRACK_LOOKUP_STATES = frozenset({states.ENROLL, states.MANAGEABLE, states.AVAILABLE})
_LOOKUP_NODE_FIELDS = ("uuid", "properties", "instance_info", "driver_internal_info")
MASK = "******"


def _ramdisk_endpoints(req: falcon.Request) -> None:
    if not req.context.at_least(*RAMDISK_VERSION):
        raise NotFound("The resource could not be found.")


def agent_config(state: BaremetalState, node: dict[str, Any], token: str | None) -> dict[str, Any]:
    """What the agent configures itself with (upstream's lookup ``config``, upstream's defaults)."""
    conf = state.conf
    return {
        "metrics": {"backend": "noop", "prepend_host": False, "prepend_uuid": False,
                    "prepend_host_reverse": True, "global_prefix": None},
        "metrics_statsd": {"statsd_host": "localhost", "statsd_port": 8125},
        "heartbeat_timeout": conf.api.ramdisk_heartbeat_timeout,
        "agent_containers": {
            "allow_arbitrary_containers": False,
            "allowed_containers": [],
            "container_steps_file": "/etc/ironic-python-agent/mysteps.yaml",
            "runner": "podman",
            "pull_options": "--tls-verify=false",
            "run_options": "--rm --network=host --tls-verify=false",
            "container_conf_file": "/etc/containers/containers.conf",
        },
        "agent_token": token,
        "agent_token_required": True,
        "agent_md5_checksum_enable": conf.agent.allow_md5_checksum,
        "disable_deep_image_inspection": False,
        "permitted_image_formats": ["raw", "qcow2", "iso"],
        "agent_skip_bmc_detect": node.get("management_interface") in ("redfish", "idrac-redfish"),
        "enable_bios_bootloader_install": conf.agent.enable_bios_bootloader_install,
        "tls_min_version": None,
        "tls_cipher_suites": None,
    }


def masked_internal_info(info: dict[str, Any] | None) -> dict[str, Any]:
    """driver_internal_info as answers show it: the agent token never leaves the conductor."""
    shown = dict(info or {})
    if shown.get("agent_secret_token"):
        shown["agent_secret_token"] = MASK
    return shown


def lookup(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _ramdisk_endpoints(req)
    common.authorize(state, req, "baremetal:driver:ipa_lookup")
    raw_addresses = req.get_param("addresses") or ""
    node_uuid = req.get_param("node_uuid")
    if node_uuid is not None and not uuidutils.is_uuid_like(node_uuid):
        raise BadRequest(f"Expected a UUID for node_uuid: {node_uuid}")
    addresses = []
    for address in filter(None, (item.strip() for item in raw_addresses.split(","))):
        if netutils.is_valid_mac(address):
            addresses.append(address.lower())
        else:
            LOG.warning('The MAC address "%s" is invalid and will be ignored by the lookup request', address)
    if not addresses and not node_uuid:
        raise BadRequest("One of addresses and node_uuid parameters is required")
    with state.db.read() as conn:
        if node_uuid:
            found = [node] if (node := node_db.get(conn, uuid=node_uuid)) else []
        else:
            found = agent_db.nodes_with_port_addresses(conn, addresses)
    # The same answer for "no such node", "several nodes" and "wrong state", as upstream.
    if len(found) != 1:
        LOG.error("No node has been found during lookup (%d candidates)", len(found))
        raise NotFound("The resource could not be found.")
    node = found[0]
    allowed = LOOKUP_ALLOWED_STATES | (FAST_TRACK_LOOKUP_STATES if state.conf.deploy.fast_track else frozenset())
    if state.conf.api.restrict_lookup and node["provision_state"] not in allowed:
        LOG.error("Lookup is not allowed for node %s in the provision state %s", node["uuid"],
                  node["provision_state"])
        raise NotFound("The resource could not be found.")
    token = None
    if req.context.at_least(*AGENT_TOKEN_VERSION):
        token = common.conductor_call(state, node, "get_node_with_token")
        with state.db.read() as conn:
            node = node_db.get(conn, node_id=node["id"]) or node
    send_json(resp, agent_answer(state, req, node, token))


def agent_answer(state: BaremetalState, req: falcon.Request, node: dict[str, Any], token: str | None) -> dict[str, Any]:
    """The node and the agent's configuration, as lookup (and continue_inspection from 1.84) answer."""
    body_node: dict[str, Any] = {field: node.get(field) for field in _LOOKUP_NODE_FIELDS}
    body_node["driver_internal_info"] = masked_internal_info(node.get("driver_internal_info"))
    # The agent gets the config drive with its command, never from an unauthenticated lookup.
    instance_info = dict(node.get("instance_info") or {})
    if instance_info.get("configdrive"):
        instance_info["configdrive"] = MASK
    # Nor the rescue password: the agent gets its hash with the finalize_rescue command.
    for key in ("rescue_password", "hashed_rescue_password"):
        if instance_info.get(key):
            instance_info[key] = MASK
    body_node["instance_info"] = instance_info
    body_node["links"] = links.resource(req, "nodes", node["uuid"])
    return {"node": body_node, "config": agent_config(state, node, token)}


def _string(body: dict[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"Invalid value for {field}: {value!r} is not a string")
    return value


def heartbeat(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    _ramdisk_endpoints(req)
    body = common.json_body(state, req)
    if not isinstance(body, dict):
        raise BadRequest("Invalid request body: a JSON object is expected")
    unknown = sorted(set(body) - HEARTBEAT_FIELDS)
    if unknown:
        raise BadRequest(f"Unknown argument: \"{', '.join(unknown)}\"")
    if "callback_url" not in body:
        raise BadRequest('Missing argument: "callback_url"')
    callback_url = _string(body, "callback_url") or ""
    agent_version = _string(body, "agent_version")
    agent_token = _string(body, "agent_token")
    agent_verify_ca = _string(body, "agent_verify_ca")
    agent_status = _string(body, "agent_status")
    agent_status_message = _string(body, "agent_status_message")
    if agent_version and not req.context.at_least(*AGENT_VERSION_VERSION):
        raise BadRequest('Field "agent_version" not recognised')
    if (agent_status or agent_status_message) and not req.context.at_least(*AGENT_STATUS_VERSION):
        raise BadRequest('Fields "agent_status" and "agent_status_message" not recognised.')
    common.authorize(state, req, "baremetal:node:ipa_heartbeat")
    if agent_verify_ca is not None and not req.context.at_least(*AGENT_VERIFY_CA_VERSION):
        raise BadRequest('Field "agent_verify_ca" not recognised in this version')
    with state.db.read() as conn:
        if uuidutils.is_uuid_like(node_ident):
            node = node_db.get(conn, uuid=node_ident)
        else:
            node = node_db.get(conn, name=node_ident)
    if node is None:
        raise NotFound(f"Node {node_ident} could not be found.")
    # A callback URL must at least look like one (the anaconda ramdisk sends "").
    if callback_url != "" and "http" not in urlparse(callback_url).scheme:
        raise BadRequest('An issue with the supplied "callback_url" has been detected.')
    known_url = (node.get("driver_internal_info") or {}).get("agent_url")
    if known_url is not None and known_url != callback_url:
        LOG.error("Received heartbeat for node %s with callback URL %s. This is not expected, and the "
                  "heartbeat will not be processed.", node["uuid"], callback_url)
        raise BadRequest('Detected change in ramdisk provided "callback_url"')
    if agent_token is None:
        LOG.error("Agent heartbeat received for node %s without an agent token.", node_ident)
        raise BadRequest("Agent token is required for heartbeat processing.")
    if agent_status is not None and agent_status not in AGENT_VALID_STATES:
        raise BadRequest(f"Agent status is invalid. Valid states are {','.join(AGENT_VALID_STATES)}.")
    common.conductor_call(
        state, node, "agent_heartbeat", callback_url=callback_url, agent_version=agent_version,
        agent_token=agent_token, agent_verify_ca=agent_verify_ca, agent_status=agent_status,
        agent_status_message=agent_status_message,
    )
    send_empty(resp, 202)
    resp.content_type = None  # type: ignore[assignment]


ROUTES = [
    Route("/v1/lookup", {"GET": lookup}, public=True),
    Route("/v1/heartbeat/{node_ident}", {"POST": heartbeat}, public=True),
    Route("/v1/continue_inspection", {"POST": inspection.continue_inspection}, public=True),
]
