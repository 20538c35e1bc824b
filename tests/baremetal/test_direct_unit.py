"""What the direct deploy reads from a node and the end of a deployment, without a database.

The agent ramdisk and its kernel arguments, root device hints, config
drives as the agent takes them, and the wait for the machine to power
itself off.
"""

from __future__ import annotations

import base64
import gzip
import json
from types import SimpleNamespace
from typing import Any

import pytest

from corral.baremetal.api import common
from corral.baremetal.drivers import agent as agent_driver
from corral.baremetal.drivers import deploy_utils
from corral.baremetal.drivers.base import InvalidParameterValue, MissingParameterValue
from corral.core import config
from corral.core import configdrive as configdrive_iso

UUID = "1be26c0b-03f2-4d2e-ae87-c02d7e33c123"


def _conf(tmp_path: Any, **groups: dict[str, Any]) -> Any:
    return config.make_conf(state_path=str(tmp_path), overrides=groups)


def _node(**fields: Any) -> dict[str, Any]:
    return {"uuid": UUID, "name": "n1", "driver_info": {}, "instance_info": {}, "properties": {}, **fields}


# ------------------------------------------------------------ the ramdisk


def test_the_agent_ramdisk_comes_from_driver_info_else_the_conductor_options(tmp_path: Any) -> None:
    conf = _conf(tmp_path, conductor={"deploy_kernel": "file:///var/lib/ironic/k", "deploy_ramdisk": "glance://r"})
    assert deploy_utils.deploy_images(_node(), conf) == {"deploy_kernel": "file:///var/lib/ironic/k",
                                                         "deploy_ramdisk": "glance://r"}
    own = {"deploy_kernel": "http://images/k", "deploy_ramdisk": "http://images/r"}
    assert deploy_utils.deploy_images(_node(driver_info=own), conf) == own
    # A prebuilt ISO wins over everything.
    iso = {"deploy_iso": "http://images/ipa.iso", **own}
    assert deploy_utils.deploy_images(_node(driver_info=iso), conf) == {"deploy_iso": "http://images/ipa.iso"}
    # Half a pair in driver_info is not completed from the options (upstream neither).
    with pytest.raises(MissingParameterValue, match=r"Missing are: \['deploy_ramdisk'\]"):
        deploy_utils.deploy_images(_node(driver_info={"deploy_kernel": "http://images/k"}), conf)
    with pytest.raises(MissingParameterValue, match=r"Missing are: \['deploy_kernel', 'deploy_ramdisk'\]"):
        deploy_utils.deploy_images(_node(), _conf(tmp_path))
    # A rescue boots the rescue ramdisk: rescue_* fields, [conductor] rescue_kernel / rescue_ramdisk.
    rescue_conf = _conf(tmp_path, conductor={"rescue_kernel": "http://images/rk", "rescue_ramdisk": "glance://rr"})
    assert deploy_utils.deploy_images(_node(driver_info=own), rescue_conf, "rescue") == {
        "rescue_kernel": "http://images/rk", "rescue_ramdisk": "glance://rr"}
    rescuing = {**_node(driver_info={"rescue_iso": "http://images/rescue.iso", **iso}), "provision_state": "rescuing"}
    assert deploy_utils.deploy_images(rescuing, conf) == {"rescue_iso": "http://images/rescue.iso"}
    with pytest.raises(MissingParameterValue, match=r"Missing are: \['rescue_kernel', 'rescue_ramdisk'\]"):
        deploy_utils.deploy_images(_node(driver_info=own), conf, "rescue")


def test_ramdisk_references_are_checked_without_fetching_them(tmp_path: Any) -> None:
    conf = _conf(tmp_path, conductor={"file_url_allowed_paths": [str(tmp_path)]})
    allowed = {"deploy_kernel": f"file://{tmp_path}/ipa.kernel", "deploy_ramdisk": "5f2b3f4e-4c1b-4c9e-9c5b-9b0c2d1e0f11"}
    assert deploy_utils.check_deploy_images(_node(driver_info=allowed), conf) == {
        "kernel": allowed["deploy_kernel"], "ramdisk": allowed["deploy_ramdisk"]}
    outside = {"deploy_kernel": "file:///etc/shadow", "deploy_ramdisk": "http://images/r"}
    with pytest.raises(InvalidParameterValue, match="not under \\[conductor\\] file_url_allowed_paths"):
        deploy_utils.check_deploy_images(_node(driver_info=outside), conf)
    with pytest.raises(InvalidParameterValue, match="driver_info/deploy_iso 'ftp://images/ipa.iso' is not supported"):
        deploy_utils.check_deploy_images(_node(driver_info={"deploy_iso": "ftp://images/ipa.iso"}), conf)


def test_kernel_append_params_instance_info_then_driver_info_then_the_option(tmp_path: Any) -> None:
    default = "nofb vga=normal"
    assert deploy_utils.kernel_append_params(_node(), default) == default
    node = _node(driver_info={"kernel_append_params": "%default% console=ttyS0"})
    assert deploy_utils.kernel_append_params(node, default) == "nofb vga=normal console=ttyS0"
    node["instance_info"] = {"kernel_append_params": "quiet"}
    assert deploy_utils.kernel_append_params(node, default) == "quiet"
    # An empty value is a value: no arguments at all.
    assert deploy_utils.kernel_append_params(_node(driver_info={"kernel_append_params": ""}), default) == ""
    with pytest.raises(InvalidParameterValue, match="driver_info\\['kernel_append_params'\\] contains malformed"):
        deploy_utils.kernel_append_params(_node(driver_info={"kernel_append_params": "a\nb"}), default)


def test_the_agent_gets_the_external_callback_url_and_the_node_arguments_last(tmp_path: Any) -> None:
    conf = _conf(tmp_path, deploy={"external_callback_url": "http://192.0.2.1:6385/baremetal/"})
    node = _node(driver_info={"kernel_append_params": "%default% ipa-advertise-host=127.0.0.1"})
    assert deploy_utils.agent_kernel_params(node, conf) == (
        "ipa-api-url=http://192.0.2.1:6385/baremetal boot_method=vmedia nofb vga=normal "
        "ipa-advertise-host=127.0.0.1")
    debug = _conf(tmp_path, DEFAULT={"debug": True}, baremetal_api={"public_endpoint": "http://api:6385/baremetal"})
    assert deploy_utils.agent_kernel_params(_node(), debug) == (
        "ipa-api-url=http://api:6385/baremetal boot_method=vmedia ipa-debug=1 nofb vga=normal")
    with pytest.raises(MissingParameterValue, match="set \\[deploy\\] external_callback_url"):
        deploy_utils.agent_kernel_params(_node(), _conf(tmp_path))


# ---------------------------------------------------- root device hints


@pytest.mark.parametrize("hints", [
    {"name": "/dev/vda"}, {"size": 100}, {"size": ">= 100"}, {"size": "<range-in> [100 200]"},
    {"serial": "<or> abc <or> def"}, {"wwn": "0x50000"}, {"rotational": False}, {"rotational": "true"},
    {"by_path": "/dev/disk/by-path/pci-0000:00:05.0"}, {"model": "s== Big Disk", "vendor": "ACME"},
])
def test_valid_root_device_hints(hints: dict[str, Any]) -> None:
    assert deploy_utils.root_device_for_deploy(_node(properties={"root_device": hints})) == hints


@pytest.mark.parametrize(("hints", "message"), [
    ({"colour": "blue"}, 'The hints "colour" are invalid. Valid hints are: "size, model'),
    ({"size": "big"}, 'Root device hint "size" is not an integer value. Current value: big'),
    ({"size": 0}, 'Root device hint "size" should be a positive integer. Current value: 0'),
    ({"serial": 1234}, 'Root device hint "serial" is not a string value. Hint expression: 1234'),
    ({"rotational": "sometimes"}, 'Root device hint "rotational" is not a Boolean value. Current value: sometimes'),
    ({"name": " "}, 'Root device hint "name" expression is empty'),
])
def test_invalid_root_device_hints_say_why(hints: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterValue) as raised:
        deploy_utils.root_device_for_deploy(_node(properties={"root_device": hints}))
    assert str(raised.value).startswith(f"Failed to validate the root device hints {hints} (from the node's "
                                        f"properties) for node {UUID}: ")
    assert message in str(raised.value)


def test_instance_info_root_device_wins() -> None:
    node = _node(properties={"root_device": {"size": "big"}}, instance_info={"root_device": {"serial": "s1"}})
    assert deploy_utils.root_device_for_deploy(node) == {"serial": "s1"}
    assert deploy_utils.root_device_for_deploy(_node()) is None


# --------------------------------------------------------- config drives


def test_a_json_config_drive_is_built_with_the_nodes_uuid_and_name() -> None:
    node = _node(instance_info={"configdrive": {
        "meta_data": {"public_keys": {"0": "ssh-ed25519 AAAA key"}},
        "user_data": {"runcmd": ["echo hi"]}, "network_data": {"links": []}, "vendor_data": {"x": 1}}})
    encoded = deploy_utils.configdrive_image(node)
    image = configdrive_iso.decode(encoded)
    assert configdrive_iso.label(image) == "config-2"
    files = configdrive_iso.read(image)
    meta_data = json.loads(files["openstack/latest/meta_data.json"])
    assert meta_data == {"public_keys": {"0": "ssh-ed25519 AAAA key"}, "uuid": UUID, "name": "n1"}
    assert json.loads(files["openstack/latest/user_data"]) == {"runcmd": ["echo hi"]}
    assert json.loads(files["openstack/2012-08-10/network_data.json"]) == {"links": []}
    assert json.loads(files["openstack/latest/vendor_data2.json"]) == {"x": 1}
    # The node's own values are defaults only; a node without a name gets none.
    node = _node(name=None, instance_info={"configdrive": {"meta_data": {"uuid": "mine"}, "user_data": "#!/bin/sh"}})
    files = configdrive_iso.read(configdrive_iso.decode(deploy_utils.configdrive_image(node)))
    assert json.loads(files["openstack/latest/meta_data.json"]) == {"uuid": "mine"}
    assert files["openstack/latest/user_data"] == b"#!/bin/sh"


def test_string_and_url_config_drives_go_as_given() -> None:
    assert deploy_utils.configdrive_image(_node(instance_info={"configdrive": "H4sIAAAA"})) == "H4sIAAAA"
    url = "http://images/cd.iso.gz"
    assert deploy_utils.configdrive_image(_node(instance_info={"configdrive": url})) == url
    assert deploy_utils.configdrive_image(_node()) is None


def test_config_drives_over_64_mib_are_refused_in_the_agents_words() -> None:
    big = base64.b64encode(gzip.compress(bytes(configdrive_iso.MAX_SIZE + 1))).decode()
    with pytest.raises(InvalidParameterValue, match=(
            f"^Config drive size exceeds maximum limit of 64MiB. Size of the given config drive is 65 MiB for "
            f"node {UUID}.$")):
        deploy_utils.check_configdrive_size(big, UUID)
    with pytest.raises(InvalidParameterValue, match="Config drive size exceeds maximum limit of 64MiB"):
        deploy_utils.check_configdrive_size({"user_data": "x" * (configdrive_iso.MAX_SIZE // 2 + 1)}, UUID)
    # At the limit, and a URL (the agent's to fetch), are fine; base64 with line breaks is base64.
    exact = base64.encodebytes(gzip.compress(bytes(configdrive_iso.MAX_SIZE))).decode()
    deploy_utils.check_configdrive_size(exact, UUID)
    deploy_utils.check_configdrive_size("http://images/cd.iso.gz", UUID)
    with pytest.raises(InvalidParameterValue, match="Invalid configdrive format: The config drive is not valid"):
        deploy_utils.check_configdrive_size("H4sI" + "A" * 7, UUID)
    with pytest.raises(InvalidParameterValue, match="not valid gzip"):
        deploy_utils.check_configdrive_size(base64.b64encode(b"\x1f\x8b" + b"\x00" * 30).decode(), UUID)


def test_the_size_of_a_compressed_config_drive_is_counted_up_to_the_limit_only() -> None:
    bomb = base64.b64encode(gzip.compress(bytes(512 * 1024 * 1024))).decode()
    assert configdrive_iso.decoded_size(bomb, 1024) == 1025
    image = configdrive_iso.build({"uuid": UUID})
    assert configdrive_iso.decoded_size(configdrive_iso.encode(image), configdrive_iso.MAX_SIZE) == len(image)
    assert configdrive_iso.decoded_size(base64.b64encode(image).decode(), configdrive_iso.MAX_SIZE) == len(image)


def test_config_drives_are_masked_in_answers_and_in_the_node_the_agent_reads() -> None:
    shown = common.SecretsShown(driver=False, instance=False)
    for configdrive in ({"meta_data": {"public_keys": {"0": "ssh-ed25519 AAAA key"}}}, "H4sIAAAA"):
        body = common.mask_secrets({"instance_info": {"configdrive": configdrive, "image_source": "x"}}, shown)
        assert body["instance_info"] == {"configdrive": "******", "image_source": "x"}
        assert deploy_utils.mask_configdrive({"configdrive": configdrive}) == {"configdrive": "******"}
    allowed = common.SecretsShown(driver=True, instance=True)
    assert common.mask_secrets({"instance_info": {"configdrive": "H4sI"}}, allowed)["instance_info"] == {
        "configdrive": "H4sI"}


# ------------------------------------------------- the end of a deployment


class FakeMachine:
    """A power interface reporting the states given, one per read (the last one stays)."""

    def __init__(self, *reads: Any) -> None:
        self.reads = list(reads)
        self.read_count = 0
        self.set_calls: list[str] = []

    def get_power_state(self, task: Any) -> str:
        self.read_count += 1
        value = self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]
        if isinstance(value, Exception):
            raise value
        return str(value)

    def set_power_state(self, task: Any, state: str, timeout: int | None = None) -> None:
        self.set_calls.append(state)
        self.reads = [state]


class FakeAgent:
    def __init__(self, error: Exception | None = None) -> None:
        self.asked = 0
        self.error = error

    def power_off(self) -> dict[str, Any]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return {}


def _end_of_deploy(tmp_path: Any, machine: FakeMachine, retries: int = 3) -> tuple[Any, list[dict[str, Any]]]:
    conf = _conf(tmp_path, agent={"post_deploy_get_power_state_retries": retries,
                                  "post_deploy_get_power_state_retry_interval": 0})
    updates: list[dict[str, Any]] = []
    task = SimpleNamespace(node={"uuid": UUID}, conductor=SimpleNamespace(conf=conf),
                           driver=SimpleNamespace(power=machine), update=lambda **values: updates.append(values))
    return task, updates


def test_the_machine_powering_itself_off_is_waited_for_and_not_forced(tmp_path: Any) -> None:
    machine = FakeMachine("power on", "power on", "power off")
    task, updates = _end_of_deploy(tmp_path, machine)
    agent = FakeAgent()
    agent_driver.soft_power_off(task, agent)
    assert agent.asked == 1 and machine.read_count == 3
    assert machine.set_calls == []
    assert updates == [{"power_state": "power off", "target_power_state": None}]


def test_a_machine_still_on_after_the_retries_is_forced_off(tmp_path: Any) -> None:
    machine = FakeMachine("power on")
    task, updates = _end_of_deploy(tmp_path, machine, retries=3)
    agent_driver.soft_power_off(task, FakeAgent())
    # One read, then one per retry; then the power interface turns it off.
    assert machine.read_count == 4 + 1 and machine.set_calls == ["power off"]
    assert updates[-1] == {"power_state": "power off", "target_power_state": None}


def test_an_agent_that_cannot_be_asked_and_unreadable_power_are_waited_out(tmp_path: Any) -> None:
    machine = FakeMachine(RuntimeError("BMC busy"), "power off")
    task, updates = _end_of_deploy(tmp_path, machine)
    agent = FakeAgent(error=RuntimeError("connection refused"))
    agent_driver.soft_power_off(task, agent)
    assert agent.asked == 1 and machine.read_count == 2 and machine.set_calls == []
    assert updates == [{"power_state": "power off", "target_power_state": None}]
