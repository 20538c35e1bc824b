"""The direct deploy interface's pure logic: clean step priorities, image information."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from corral.baremetal.drivers.agent import AGENT_KEYS, AgentDeploy, image_info, without_agent
from corral.core import config

CACHED = [
    {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy", "abortable": True, "argsinfo": {},
     "requires_ramdisk": True, "reboot_requested": False},
    {"step": "erase_devices", "priority": 10, "interface": "deploy", "abortable": True, "argsinfo": {},
     "requires_ramdisk": True, "reboot_requested": False},
]


def _task(conf: Any, **node: Any) -> Any:
    defaults = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7e33c123", "driver_internal_info": {}, "instance_info": {}}
    return SimpleNamespace(node={**defaults, **node}, conductor=SimpleNamespace(conf=conf))


def test_erase_step_priorities_follow_the_deploy_options(tmp_path: Any) -> None:
    conf = config.make_conf(state_path=str(tmp_path), overrides={"deploy": {"erase_devices_priority": 0}})
    task = _task(conf, driver_internal_info={"agent_cached_clean_steps": CACHED})
    steps = {step["step"]: step for step in AgentDeploy(conf).get_clean_steps(task)}
    assert steps["erase_devices"]["priority"] == 0
    assert steps["erase_devices_metadata"]["priority"] == 99
    assert all("reboot_requested" not in step for step in steps.values())


def test_no_steps_before_the_agent_reported_them(tmp_path: Any) -> None:
    conf = config.make_conf(state_path=str(tmp_path))
    assert AgentDeploy(conf).get_clean_steps(_task(conf)) == []


def test_image_information_for_the_agent(tmp_path: Any) -> None:
    conf = config.make_conf(state_path=str(tmp_path))
    task = _task(conf, instance_info={"image_source": "http://images/disk.raw", "image_os_hash_algo": "sha512",
                                      "image_os_hash_value": "ab" * 64})
    info = image_info(task)
    assert info["id"] == "disk.raw" and info["urls"] == ["http://images/disk.raw"]
    assert (info["os_hash_algo"], info["os_hash_value"]) == ("sha512", "ab" * 64)
    assert info["disk_format"] == "raw" and info["stream_raw_images"] is True
    assert "checksum" not in info


def test_forgetting_the_agent_drops_its_token_and_keeps_the_rest() -> None:
    info = {key: "x" for key in AGENT_KEYS} | {"deploy_steps": [1]}
    assert without_agent(info) == {"deploy_steps": [1]}
