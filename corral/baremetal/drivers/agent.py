"""The ``direct`` deploy interface: the agent in the node's ramdisk writes the image.

Deploying boots the ramdisk (the boot interface prepares it: network boot
for ``fake``, an ISO in the virtual CD drive for ``redfish-virtual-media``;
then power on through the node's power interface) and waits in ``wait
call-back`` for the agent's heartbeat; then ``standby.prepare_image`` makes
the agent download the image from its http(s) URL, check its checksum and
write it to the node's disk, with the config drive as a partition at the
end of the disk.  An ``image_source`` that is an image of the Image
service (a UUID or ``glance://<uuid>``) is first fetched by the conductor
into its image cache, verified, and published under ``[deploy] http_root``
for the agent to download from the conductor's file server
(``instance_info/image_url``, under ``[deploy] http_url``).  The conductor
never requests the URL the agent downloads from.  Each heartbeat checks
the running command.  Afterwards the boot interface makes the disk the
boot device (ejecting the ramdisk's medium), the agent is asked to power
the machine off and the conductor waits for the power state to follow
(``[agent] post_deploy_get_power_state_retries`` x
``post_deploy_get_power_state_retry_interval``) before forcing it off (with
``deploy_forces_oob_reboot``: the disks are synced and the power interface
turns the node off at once), and the node is powered on: ``active``.

Cleaning boots the same ramdisk; the agent's clean steps (its hardware
managers' ``erase_devices_metadata``, ``erase_devices`` ...) are read
once it heartbeats and run through ``clean.execute_clean_step``.

Fast track (``[deploy] fast_track``): when inspection or cleaning
succeeded, the machine stays on with the agent running; while it
heartbeated within ``fast_track_timeout``, the next cleaning and the next
deployment skip the reboot: the clean steps run, the image is written, at
once.

Deploy steps, in upstream's order: deploy (100), write_image (80),
prepare_instance_boot (60), tear_down_agent (40), boot_instance (20).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from oslo_utils import strutils

from corral.baremetal.domain import states
from corral.baremetal.drivers import deploy_utils, glance, images
from corral.baremetal.drivers.agent_client import AgentClient, AgentCommandError
from corral.baremetal.db import ports as port_db
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.drivers.base import (
    ASYNC,
    BaseInterface,
    DriverError,
    InvalidParameterValue,
    MissingParameterValue,
    deploy_step,
)

LOG = logging.getLogger(__name__)

# Keys the agent's work keeps in driver_internal_info; all go when the agent is gone.
AGENT_KEYS = ("agent_secret_token", "agent_url", "agent_version", "agent_verify_ca", "agent_last_heartbeat",
              "agent_pending", "agent_cached_clean_steps", "agent_cleaning", "cleaning_pending_start")
# What the node waits for in "wait call-back"/"clean wait": the ramdisk to boot, or an agent command.
WAITING_FOR_BOOT = "boot"
PREPARE_IMAGE = "standby.prepare_image"
EXECUTE_CLEAN_STEP = "clean.execute_clean_step"


def without_agent(info: Mapping[str, Any]) -> dict[str, Any]:
    kept = dict(info)
    for key in AGENT_KEYS:
        kept.pop(key, None)
    return kept


def client_for(task: Any) -> AgentClient:
    info = task.internal_info
    url = info.get("agent_url")
    if not url:
        raise InvalidParameterValue(f"Agent on node {task.node['uuid']} has not called back yet")
    return AgentClient(url, info.get("agent_secret_token"), timeout=task.conductor.conf.agent.command_timeout,
                       verify_ca=info.get("agent_verify_ca"))


def _set_info(task: Any, **values: Any) -> None:
    info = task.internal_info
    for key, value in values.items():
        if value is None:
            info.pop(key, None)
        else:
            info[key] = value
    task.update(driver_internal_info=info)


def set_power(task: Any, target: str) -> None:
    """Power the node on or off, unless the hardware reports it is already so."""
    power = task.driver.power
    if power.get_power_state(task) != target:
        power.set_power_state(task, target)
    task.update(power_state=target, target_power_state=None)


def boot_ramdisk(task: Any) -> None:
    """Boot the agent ramdisk: the boot interface prepares its boot, then the node is powered on."""
    task.driver.boot.prepare_ramdisk(task)
    set_power(task, states.POWER_ON)


def stop_ramdisk(task: Any, *, power_off: bool = True) -> None:
    """Power off, undo the ramdisk's boot, forget the agent (its token goes) whatever fails on the way."""
    try:
        if power_off:
            set_power(task, states.POWER_OFF)
    finally:
        try:
            task.driver.boot.clean_up_ramdisk(task)
        finally:
            task.update(driver_internal_info=without_agent(task.internal_info))


def fast_track_usable(task: Any) -> bool:
    """Upstream's fast track: enabled, no error on the node, the machine on, its agent heartbeating lately."""
    conf = task.conductor.conf.deploy
    info = task.internal_info
    if not conf.fast_track or task.node.get("last_error"):
        return False
    if not (info.get("agent_url") and info.get("agent_secret_token") and info.get("agent_last_heartbeat")):
        return False
    try:
        last = datetime.datetime.fromisoformat(info["agent_last_heartbeat"])
    except (TypeError, ValueError):
        return False
    if (utcnow() - last).total_seconds() > conf.fast_track_timeout:
        return False
    return bool(task.driver.power.get_power_state(task) == states.POWER_ON)


def soft_power_off(task: Any, client: AgentClient) -> None:
    """Ask the agent to power the machine off; force it off when it is still on after the retries."""
    conf = task.conductor.conf.agent
    try:
        client.power_off()
    except Exception as error:  # noqa: BLE001 - waiting for the power state tells whether it worked
        LOG.warning("Failed to soft power off node %s: %s", task.node["uuid"], error)
    attempts = conf.post_deploy_get_power_state_retries + 1
    for attempt in range(attempts):
        try:
            if task.driver.power.get_power_state(task) == states.POWER_OFF:
                task.update(power_state=states.POWER_OFF, target_power_state=None)
                return
        except Exception as error:  # noqa: BLE001 - read again
            LOG.debug("reading the power state of node %s: %s", task.node["uuid"], error)
        if attempt + 1 < attempts:
            time.sleep(conf.post_deploy_get_power_state_retry_interval)
    waited = conf.post_deploy_get_power_state_retries * conf.post_deploy_get_power_state_retry_interval
    LOG.warning("Failed to soft power off node %s in at least %s seconds. Forcing hard power off and proceeding.",
                task.node["uuid"], waited)
    set_power(task, states.POWER_OFF)


def image_info(task: Any) -> dict[str, Any]:
    """What ``standby.prepare_image`` needs, from the node's instance_info."""
    node = task.node
    info = node.get("instance_info") or {}
    source = info.get("image_source")
    image = {
        "id": str(source).rstrip("/").rsplit("/", 1)[-1],
        "urls": [info.get("image_url") or source],
        "disk_format": info.get("image_disk_format") or "raw",
        "container_format": info.get("image_container_format") or "bare",
        "stream_raw_images": task.conductor.conf.agent.stream_raw_images,
        "node_uuid": node["uuid"],
        "image_type": info.get("image_type") or "whole-disk",
    }
    if info.get("image_os_hash_algo") and info.get("image_os_hash_value"):
        image["os_hash_algo"] = info["image_os_hash_algo"]
        image["os_hash_value"] = info["image_os_hash_value"]
    if info.get("image_checksum"):
        image["checksum"] = info["image_checksum"]
    if (node.get("driver_internal_info") or {}).get("is_whole_disk_image") is False:
        # A partition image: the agent partitions the disk (root last, swap, ephemeral, config drive) itself.
        for label in deploy_utils.PARTITION_IMAGE_LABELS:
            image[label] = info.get(label)
        boot_mode = deploy_utils.boot_mode(node, task.conductor.conf)
        image["deploy_boot_mode"] = boot_mode
        image["boot_option"] = "local"
        label = deploy_utils.disk_label(node, boot_mode)
        if label is not None:
            image["disk_label"] = label
    return image


def published_image_path(conf: Any, node: Mapping[str, Any]) -> str:
    return os.path.join(conf.deploy.http_root, conf.deploy.http_image_subdir, node["uuid"])


def prepare_instance_info(task: Any) -> None:
    """What the deployment writes, settled before the ramdisk boots (upstream's update_image_type and
    build_instance_info_for_deploy): a whole-disk or a partition image (``image_type``; driver_internal_info
    ``is_whole_disk_image``), a partition image's layout (``root_mb``, ``swap_mb``, ``ephemeral_mb`` ...), the
    boot mode (driver_internal_info ``deploy_boot_mode``, which the agent reads from the node it looks up); an
    image of the Image service is fetched and published.  Nothing is recorded when the layout is refused."""
    conf = task.conductor.conf
    info = dict(task.node.get("instance_info") or {})
    source = info.get("image_source")
    image = None
    if glance.is_glance_image(source):
        image = glance.usable_image(conf, source, "image_source", task.node.get("owner"))
    whole_disk = deploy_utils.is_whole_disk_image(info, image)
    if whole_disk:
        info["image_type"] = deploy_utils.IMAGE_TYPE_WHOLE_DISK
    else:
        info.update(deploy_utils.partition_layout(info, conf.pxe.default_ephemeral_format))
        info["image_type"] = deploy_utils.IMAGE_TYPE_PARTITION
    internal = task.internal_info
    internal.update(is_whole_disk_image=whole_disk, deploy_boot_mode=deploy_utils.boot_mode(task.node, conf))
    task.update(instance_info=info, driver_internal_info=internal)
    if image is not None:
        publish_glance_image(task, image)


def publish_glance_image(task: Any, image: Mapping[str, Any]) -> None:
    """An ``image_source`` of the Image service: record what the Image service says of it in instance_info,
    fetch it into the image cache (verified against its hash) and publish it on the conductor's file server,
    where the agent downloads it (instance_info/image_url), as upstream's ``image_download_source = http``."""
    conf = task.conductor.conf
    info = dict(task.node.get("instance_info") or {})
    source = info.get("image_source")
    info.update(glance.instance_info_fields(image))
    info.pop("image_url", None)
    task.update(instance_info=info)
    checksum = images.expected_checksum(info, source)
    cached = glance.fetch(conf, images.ImageCache.from_conf(conf), image, checksum)
    images.publish(cached, published_image_path(conf, task.node))
    info["image_url"] = images.served_url(task, f"{conf.deploy.http_image_subdir}/{task.node['uuid']}")
    task.update(instance_info=info)


def configure_local_boot(task: Any) -> None:
    """Upstream's prepare_instance_boot and configure_local_boot for the agent's disk.

    A whole-disk image carries its own boot loader: what the agent reports
    is recorded, and an agent that cannot say is no reason to fail.
    """
    uuid = task.node["uuid"]
    whole_disk = task.internal_info.get("is_whole_disk_image") is not False
    client = client_for(task)
    try:
        written = client.get_partition_uuids()
    except AgentCommandError as error:
        if not whole_disk:
            raise
        LOG.warning("The agent on node %s did not report the disk it wrote: %s", uuid, error)
        written = {}
    root_uuid = written.get("root uuid")
    if root_uuid:
        _set_info(task, root_uuid_or_disk_id=root_uuid)
    elif not whole_disk:
        LOG.error("No root UUID returned from the ramdisk for node %s, the deploy will likely fail. Partition UUIDs "
                  "are %s", uuid, written)
    if whole_disk or not root_uuid:
        return
    conf = task.conductor.conf
    boot_mode = deploy_utils.boot_mode(task.node, conf)
    params = {"root_uuid": root_uuid,
              "efi_system_part_uuid": written.get("efi system partition uuid") if boot_mode == "uefi" else None,
              "prep_boot_part_uuid": None, "target_boot_mode": boot_mode}
    LOG.debug("Installing the bootloader for node %s on partition %s, EFI system partition %s", uuid, root_uuid,
              params["efi_system_part_uuid"])
    result = client.install_bootloader(params, attempts=conf.agent.command_wait_attempts,
                                       interval=conf.agent.command_wait_interval)
    if result.get("command_status") == "FAILED":
        error = result.get("command_error")
        if isinstance(error, dict):
            error = error.get("details") or error.get("message") or error
        raise DriverError(f"Failed to install a bootloader when deploying node {uuid}: {error}")


def unpublish_image(task: Any) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(published_image_path(task.conductor.conf, task.node))


class AgentDeploy(BaseInterface):
    interface_type = "deploy"
    name = "direct"

    def validate(self, task: Any) -> None:
        task.driver.boot.validate(task)
        deploy_utils.root_device_for_deploy(task.node)
        info = task.node.get("instance_info") or {}
        source = info.get("image_source")
        if not source:
            raise MissingParameterValue("Missing the following parameters in node's instance_info: image_source")
        deploy_utils.check_image_type(info)
        if glance.is_glance_image(source):
            glance.usable_image(self.conf, source, "image_source", task.node.get("owner"))
            return
        if urlsplit(str(source)).scheme not in ("http", "https"):
            raise InvalidParameterValue(
                f"The direct deploy interface takes images by http(s) URL or from the Image service (an image "
                f"UUID or glance://<uuid>); image_source {source!r} is neither")
        if not info.get("image_checksum") and not (info.get("image_os_hash_algo") and info.get("image_os_hash_value")):
            raise MissingParameterValue(
                "image_checksum (or image_os_hash_algo and image_os_hash_value) is required in instance_info "
                "for an image given by URL")

    # ------------------------------------------------------------ deploy

    @deploy_step(priority=100)
    def deploy(self, task: Any) -> str | None:
        """Boot the ramdisk; the deployment goes on when the agent heartbeats.

        Fast track: an agent still running since cleaning writes the image at once, without a reboot.
        """
        if fast_track_usable(task):
            LOG.info("fast track deployment of node %s: its agent is running", task.node["uuid"])
            _set_info(task, agent_pending=None, agent_cleaning=None, agent_cached_clean_steps=None)
            prepare_instance_info(task)
            return None
        _set_info(task, **{key: None for key in AGENT_KEYS})
        # The layout is checked, an image of the Image service fetched and verified, before the machine boots.
        prepare_instance_info(task)
        _set_info(task, agent_pending=WAITING_FOR_BOOT)
        boot_ramdisk(task)
        return ASYNC

    @deploy_step(priority=80)
    def write_image(self, task: Any) -> str:
        image = image_info(task)
        configdrive = deploy_utils.configdrive_image(task.node)
        if configdrive:
            # As upstream: in image_info too, for agents that read it there.
            image["configdrive"] = configdrive
        client_for(task).prepare_image(image, configdrive)
        _set_info(task, agent_pending=PREPARE_IMAGE)
        return ASYNC

    @deploy_step(priority=60)
    def prepare_instance_boot(self, task: Any) -> None:
        """Record what the agent wrote (``root_uuid_or_disk_id``); a partition image gets its boot loader from
        the agent (``image.install_bootloader``, as upstream's configure_local_boot); then the boot interface
        makes the disk the boot device."""
        configure_local_boot(task)
        # The image is on the disk: its published copy goes, as upstream removes it.
        unpublish_image(task)
        task.driver.boot.prepare_instance(task)

    @deploy_step(priority=40)
    def tear_down_agent(self, task: Any) -> None:
        """Stop the ramdisk: the agent powers the machine off, or (OOB) syncs and the BMC powers it off."""
        forced = task.node.get("driver_info", {}).get("deploy_forces_oob_reboot")
        oob = (strutils.bool_from_string(forced) if forced is not None
               else task.conductor.conf.agent.deploy_forces_oob_reboot)
        client = client_for(task)
        if oob:
            try:
                client.sync()
            except Exception as error:  # noqa: BLE001 - the power interface finishes the job either way
                LOG.warning("Failed to flush the file system prior to hard rebooting the node %s: %s",
                            task.node["uuid"], error)
            set_power(task, states.POWER_OFF)
        else:
            soft_power_off(task, client)
        task.update(driver_internal_info=without_agent(task.internal_info))

    @deploy_step(priority=20)
    def boot_instance(self, task: Any) -> None:
        set_power(task, states.POWER_ON)

    def tear_down(self, task: Any) -> None:
        set_power(task, states.POWER_OFF)
        try:
            task.driver.boot.clean_up_instance(task)
        finally:
            unpublish_image(task)
            task.update(driver_internal_info=without_agent(task.internal_info))

    def clean_up(self, task: Any) -> None:
        """After a failed or timed-out deployment: the ramdisk is stopped and its token forgotten."""
        try:
            stop_ramdisk(task)
        finally:
            unpublish_image(task)

    # ---------------------------------------------------------- cleaning

    def prepare_cleaning(self, task: Any) -> str:
        """Boot the ramdisk; cleaning goes on when the agent heartbeats.

        Fast track: an agent still running since inspection (or an earlier cleaning) cleans without a reboot;
        its next heartbeat hands over its clean steps.
        """
        if fast_track_usable(task):
            LOG.info("fast track cleaning of node %s: its agent is running", task.node["uuid"])
            _set_info(task, agent_cached_clean_steps=None, agent_pending=WAITING_FOR_BOOT, agent_cleaning=True)
            return ASYNC
        for_cleaning = {key: None for key in AGENT_KEYS if key != "cleaning_pending_start"}
        _set_info(task, **for_cleaning)
        _set_info(task, agent_pending=WAITING_FOR_BOOT, agent_cleaning=True)
        boot_ramdisk(task)
        return ASYNC

    def tear_down_cleaning(self, task: Any, failed: bool = False) -> None:
        """Stop the ramdisk; with fast track, a cleaning that succeeded leaves the agent running (its boot medium
        is ejected: it runs from memory) for the deployment to use."""
        if not failed and fast_track_usable(task):
            task.driver.boot.clean_up_ramdisk(task)
            _set_info(task, agent_pending=None, agent_cleaning=None, agent_cached_clean_steps=None)
            return
        stop_ramdisk(task)

    def refresh_clean_steps(self, task: Any) -> None:
        """Read the agent's clean steps (kept until the agent is gone)."""
        result = client_for(task).get_clean_steps(_agent_node(task), _ports(task))
        by_manager = (result.get("command_result") or {}).get("clean_steps") or {}
        steps: dict[str, dict[str, Any]] = {}
        for manager_steps in by_manager.values():
            for step in manager_steps:
                if step.get("interface") != "deploy":
                    continue
                known = steps.get(step["step"])
                if known is None or step.get("priority", 0) > known["priority"]:
                    steps[step["step"]] = {
                        "step": step["step"],
                        "priority": int(step.get("priority") or 0),
                        "interface": "deploy",
                        "abortable": bool(step.get("abortable", False)),
                        "argsinfo": dict(step.get("argsinfo") or {}),
                        "requires_ramdisk": True,
                        "reboot_requested": bool(step.get("reboot_requested", False)),
                    }
        _set_info(task, agent_cached_clean_steps=list(steps.values()))

    def get_clean_steps(self, task: Any) -> list[dict[str, Any]]:
        """The agent's steps as last read, with the operator's [deploy] priorities for the erase steps."""
        cached = (task.node.get("driver_internal_info") or {}).get("agent_cached_clean_steps") or []
        overrides = {"erase_devices": self.conf.deploy.erase_devices_priority,
                     "erase_devices_metadata": self.conf.deploy.erase_devices_metadata_priority}
        steps = []
        for cached_step in cached:
            step = {key: value for key, value in cached_step.items() if key != "reboot_requested"}
            if overrides.get(step["step"]) is not None:
                step["priority"] = overrides[step["step"]]
            steps.append(step)
        return steps

    def execute_clean_step(self, task: Any, step: Mapping[str, Any]) -> str:
        client_for(task).execute_clean_step(step, _agent_node(task), _ports(task), None)
        _set_info(task, agent_pending=EXECUTE_CLEAN_STEP)
        return ASYNC

    def poll_step(self, task: Any, step: Mapping[str, Any]) -> bool:
        # The agent's heartbeats, not polling, move the step on.
        return False


def _ports(task: Any) -> list[dict[str, Any]]:
    with task.conductor.db.read() as conn:
        rows = port_db.ports_of_node(conn, task.node_id)
    return [{"uuid": row["uuid"], "address": row["address"], "extra": row.get("extra") or {}} for row in rows]


def _agent_node(task: Any) -> dict[str, Any]:
    """The node as the agent's steps read it (JSON values only, no token)."""
    node = task.node
    info = dict(node.get("driver_internal_info") or {})
    info.pop("agent_secret_token", None)
    return {"uuid": node["uuid"], "properties": node.get("properties") or {},
            "instance_info": deploy_utils.mask_configdrive(node.get("instance_info") or {}),
            "driver_internal_info": info, "driver_info": {}, "name": node.get("name")}
