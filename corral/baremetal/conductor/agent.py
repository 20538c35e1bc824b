"""The conductor's side of the agent: tokens, heartbeats, deployments the agent never called back for.

A node's agent token is made when the agent first looks the node up and
handed out that once (later lookups get "******", as upstream).  It lives
in driver_internal_info, which every answer shows masked, and goes away
with the ramdisk (end of deployment or cleaning, failure, timeout).

A heartbeat with the right token records where the agent listens; when
the node waits for the agent (``wait call-back``, ``clean wait``, ``rescue wait``), a worker
checks what it waits for: the ramdisk to boot, or the agent command the
current step started.  A finished command moves the node to its next step;
a failed one fails the deployment or cleaning with the agent's error.
A rescue ramdisk's first heartbeat hands the agent the rescue password.

Nothing here lives in a conductor's memory: when a conductor dies, the
hash ring gives its nodes to another one, which handles the next
heartbeat the same way.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from typing import Any

from corral.baremetal.conductor import cleaning, provisioning
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states
from corral.baremetal.drivers import agent as agent_driver
from corral.core.errors import ApiError, BadRequest, Conflict

LOG = logging.getLogger(__name__)

RPC_METHODS = frozenset({"get_node_with_token", "agent_heartbeat"})
MASKED_TOKEN = "******"
# Where a heartbeat may move the node on; in other states it is only recorded.
_WAITING = (states.DEPLOYWAIT, states.CLEANWAIT, states.RESCUEWAIT)


class InvalidAgentToken(BadRequest):
    """Upstream answers a heartbeat with a wrong or missing token with 400 (InvalidParameterValue)."""


class AgentWork:
    """Mixed into the Conductor."""

    def get_node_with_token(self, node_id: int) -> str:
        """The node's agent token, made now; "******" when it was already handed out."""
        with self._locked(node_id) as task:  # type: ignore[attr-defined]
            info = task.internal_info
            if info.get("agent_secret_token"):
                LOG.warning("An agent token generation request is being refused as one is already present "
                            "for node %s", task.node["uuid"])
                return MASKED_TOKEN
            token = secrets.token_urlsafe(32)
            info["agent_secret_token"] = token
            task.update(driver_internal_info=info)
            LOG.debug("Generated agent token for node %s", task.node["uuid"])
            return token

    def agent_heartbeat(self, node_id: int, callback_url: str, agent_version: str | None = None,
                        agent_token: str | None = None, agent_verify_ca: str | None = None,
                        agent_status: str | None = None, agent_status_message: str | None = None) -> None:
        task = self._locked(node_id)  # type: ignore[attr-defined]
        handed_off = False
        try:
            info = task.internal_info
            known = info.get("agent_secret_token")
            if not known or not agent_token or not hmac.compare_digest(known, agent_token):
                LOG.error("Invalid or missing agent_token received for node %s", task.node["uuid"])
                raise InvalidAgentToken("Invalid or missing agent token received.")
            info.update(agent_url=callback_url, agent_version=agent_version or "3.0.0",
                        agent_last_heartbeat=node_db.utcnow().isoformat())
            if agent_verify_ca:
                info["agent_verify_ca"] = agent_verify_ca
            values: dict[str, Any] = {"driver_internal_info": info}
            waiting = task.node["provision_state"] in _WAITING and not task.node["maintenance"]
            if waiting:
                # A live agent is not a timed-out one.
                values["provision_updated_at"] = node_db.utcnow()
            task.update(**values)
            if waiting and info.get("agent_pending"):
                self.spawn(task, _continue_after_heartbeat)  # type: ignore[attr-defined]
                handed_off = True
            elif not waiting:
                LOG.debug("Heartbeat from node %s in state %s: nothing to do", task.node["uuid"],
                          task.node["provision_state"])
        finally:
            if not handed_off:
                task.release()

    # ------------------------------------------------------ periodic

    def check_deploy_timeouts(self) -> int:
        """This conductor's nodes whose agent did not call back within deploy_callback_timeout fail."""
        return self._fail_timed_out(
            states.DEPLOYWAIT, self.conf.conductor.deploy_callback_timeout,  # type: ignore[attr-defined]
            lambda task: provisioning.deploy_failed(
                task, f"Timeout reached while waiting for callback for node {task.node['uuid']}"))

    def check_rescue_timeouts(self) -> int:
        """This conductor's nodes whose rescue ramdisk did not call back within rescue_callback_timeout fail."""
        return self._fail_timed_out(
            states.RESCUEWAIT, self.conf.conductor.rescue_callback_timeout,  # type: ignore[attr-defined]
            lambda task: provisioning.rescue_failed(
                task, "Timeout reached while waiting for rescue ramdisk callback for node"))

    def _fail_timed_out(self, state: str, timeout: int, fail: Any) -> int:
        if timeout <= 0:
            return 0
        live = self.live_conductors()  # type: ignore[attr-defined]
        with self.db.read() as conn:  # type: ignore[attr-defined]
            waiting = node_db.list_nodes(conn, {"provision_state": state, "maintenance": False})
        failed = 0
        now = node_db.utcnow()
        for node in waiting:
            updated = node["provision_updated_at"]
            if node["reservation"] or not self.owns(node, live) or updated is None:  # type: ignore[attr-defined]
                continue
            if (now - updated).total_seconds() <= timeout:
                continue
            try:
                task = self._locked(node["id"])  # type: ignore[attr-defined]
            except (Conflict, ApiError):
                continue
            try:
                if task.node["provision_state"] == state and task.node["provision_updated_at"] == updated:
                    LOG.error("Timeout reached in %s for node %s", state, task.node["uuid"])
                    fail(task)
                    failed += 1
            finally:
                task.release()
        return failed


def _continue_after_heartbeat(task: Any) -> None:
    """In a worker, on the locked node: see what the agent finished and move the node on."""
    state = task.node["provision_state"]
    pending = task.internal_info.get("agent_pending")
    uuid = task.node["uuid"]
    if pending == agent_driver.WAITING_FOR_BOOT:
        _clear_pending(task)
        if state == states.RESCUEWAIT:
            provisioning.finish_rescue(task)
            return
        if state == states.DEPLOYWAIT:
            provisioning.continue_deploy(task)
            return
        try:
            task.driver.deploy.refresh_clean_steps(task)
        except Exception as error:  # noqa: BLE001 - recorded on the node
            cleaning.fail(task, f"Node {uuid} failed to get clean steps from the agent: {error}")
            return
        cleaning.start_after_ramdisk(task)
        return
    try:
        command = agent_driver.client_for(task).last_command(pending)
    except Exception as error:  # noqa: BLE001 - the next heartbeat asks again
        LOG.warning("cannot read the agent's command status on node %s: %s", uuid, error)
        return
    status = (command or {}).get("command_status")
    if command is None or status == "RUNNING":
        return
    _clear_pending(task)
    if status == "SUCCEEDED":
        if state == states.DEPLOYWAIT:
            provisioning.continue_deploy(task)
        else:
            cleaning.resume(task)
        return
    error = command.get("command_error")
    if state == states.DEPLOYWAIT:
        step = task.node.get("deploy_step") or {}
        provisioning.deploy_failed(
            task, f"Agent returned error for deploy step {step} on node {uuid} : {_error_text(error)}")
    else:
        step = task.node.get("clean_step") or {}
        cleaning.fail(task, f"Agent returned error for clean step {step} on node {uuid} : {_error_text(error)}")


def _clear_pending(task: Any) -> None:
    info = task.internal_info
    info.pop("agent_pending", None)
    task.update(driver_internal_info=info)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("details") or error.get("message") or error)
    return str(error)
