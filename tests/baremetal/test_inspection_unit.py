"""Pure logic of inspection: the hooks' choices and the rule engine's values, conditions and actions."""

from __future__ import annotations

import pytest

from corral.baremetal.domain import inspection, rule_engine

GIB = 1024 ** 3
DISKS = [{"name": "/dev/sda", "size": 2 * GIB, "serial": "tiny"},
         {"name": "/dev/sdb", "size": 100 * GIB, "serial": "big"},
         {"name": "/dev/sdc", "size": 10 * GIB, "serial": "small", "wwn": "0x5000"}]


def test_root_disk_choice() -> None:
    # The hints first, then the agent's choice, then the smallest disk of 4 GiB or more.
    assert inspection.select_root_disk(DISKS, {"serial": "BIG"}, None)["name"] == "/dev/sdb"
    assert inspection.select_root_disk(DISKS, {"size": 10, "name": "sdc"}, None)["name"] == "/dev/sdc"
    assert inspection.select_root_disk(DISKS, None, {"name": "/dev/sdb"})["name"] == "/dev/sdb"
    assert inspection.select_root_disk(DISKS, {}, None)["name"] == "/dev/sdc"
    with pytest.raises(inspection.InspectionFailed, match="No disks satisfied root device hints"):
        inspection.select_root_disk(DISKS, {"wwn": "0x6000"}, None)
    with pytest.raises(inspection.InspectionFailed, match="No disk of at least 4 GiB"):
        inspection.select_root_disk(DISKS[:1], None, None)


def test_unknown_hooks_are_refused() -> None:
    assert inspection.hook_names("ramdisk-error, cpus,cpus") == ["ramdisk-error", "cpus"]
    with pytest.raises(inspection.InspectionFailed, match="Unknown inspection hooks in \\[inspector\\] hooks: pci"):
        inspection.hook_names("cpus,pci")


def test_the_pxe_nic_and_ports_to_keep() -> None:
    inventory = {"interfaces": [{"name": "a", "mac_address": "52:54:00:00:00:01", "ipv4_address": "10.0.0.2"},
                                {"name": "b", "mac_address": "52:54:00:00:00:02"}],
                 "boot": {"pxe_interface": "01-52-54-00-00-00-02"}}
    findings = inspection.process({}, inventory, {}, ["validate-interfaces", "ports"], add_ports="pxe",
                                  disk_spacing=True)
    assert list(findings.valid_interfaces) == ["52:54:00:00:00:02"]
    existing = [{"id": 1, "address": "52:54:00:00:00:01", "pxe_enabled": True},
                {"id": 2, "address": "52:54:00:00:00:09", "pxe_enabled": True}]
    create, delete, update = inspection.port_changes(findings, existing, "present")
    assert create == [{"address": "52:54:00:00:00:02", "pxe_enabled": True}]
    assert [port["id"] for port in delete] == [2] and update == []
    assert [port["id"] for port in inspection.port_changes(findings, existing, "added")[1]] == [1, 2]


def _target() -> rule_engine.Target:
    inventory = {"cpu": {"count": 8}, "interfaces": [{"name": "eth0", "ipv4_address": "192.0.2.5"}],
                 "system_vendor": {"manufacturer": "Dell Inc."}}
    return rule_engine.Target(node={"uuid": "u", "properties": {"memory_mb": 4096}, "extra": {}},
                              traits=set(), plugin_data={"root_disk": {"name": "/dev/sda"}}, inventory=inventory,
                              ports={"52:54:00:00:00:01": {"uuid": "p1", "extra": {}}})


def test_references_keep_their_type_or_become_text() -> None:
    context = _target().context("x")
    assert rule_engine.resolve("{inventory[cpu][count]}", context) == 8
    assert rule_engine.resolve("{inventory.cpu.count}", context) == 8
    assert rule_engine.resolve("n-{inventory[cpu][count]}-{item}", context) == "n-8-x"
    assert rule_engine.resolve(["{node[properties][memory_mb]}", {"k": "{plugin_data.root_disk.name}"}],
                               context) == [4096, {"k": "/dev/sda"}]
    assert rule_engine.resolve("{inventory[interfaces][0][name]}", context) == "eth0"
    assert rule_engine.resolve("{inventory[nothing][here]}", context) is None
    assert rule_engine.resolve("{unknown}", context) is None


def test_conditions_and_actions() -> None:
    target = _target()
    rules = [
        {"uuid": "r1", "priority": 5, "conditions": [
            {"op": "contains", "args": ["{inventory[system_vendor][manufacturer]}", "(?i)dell"]},
            {"op": "in-net", "args": {"address": "{inventory[interfaces][0][ipv4_address]}",
                                      "subnet": "192.0.2.0/24"}},
            {"op": "!is-none", "args": ["{inventory[cpu][count]}"]},
            {"op": "eq", "args": {"values": ["{inventory[cpu][count]}", "8"], "force_strings": True}},
            {"op": "one-of", "args": ["{item}", ["b", "c"]], "loop": ["a", "b"], "multiple": "any"}],
         "actions": [{"op": "set-capability", "args": ["vendor", "dell"]},
                     {"op": "extend-attribute", "args": ["/extra/tags", "{item}", True], "loop": ["a", "a", "b"]},
                     {"op": "set-plugin-data", "args": ["/seen/by", "r1"]},
                     {"op": "del-attribute", "args": ["/properties/memory_mb"]}]},
        {"uuid": "r2", "priority": 1, "conditions": [{"op": "lt", "args": [1, 2, 3]}],
         "actions": [{"op": "add-trait", "args": ["CUSTOM_R2"]},
                     {"op": "extend-port-attribute", "args": ["p1", "/extra/roles", "boot"]}]},
        {"uuid": "r3", "conditions": [{"op": "one-of", "args": ["{item}", ["z"]], "loop": ["a", "z"],
                                       "multiple": "all"}],
         "actions": [{"op": "fail", "args": ["never"]}]},
    ]
    assert rule_engine.apply_rules(rules, target) == ["r1", "r2"]
    assert target.node["properties"] == {"capabilities": "vendor:dell"}
    assert target.node["extra"] == {"tags": ["a", "b"]}
    assert target.plugin_data["seen"] == {"by": "r1"}
    assert target.traits == {"CUSTOM_R2"}
    assert target.ports["52:54:00:00:00:01"]["extra"] == {"roles": ["boot"]}
    assert target.changed_ports == {"52:54:00:00:00:01"}


def test_actions_that_cannot_apply_fail_the_rule() -> None:
    for action, message in [
        ({"op": "set-attribute", "args": ["/provision_state", "active"]}, "cannot be changed by inspection rules"),
        ({"op": "set-port-attribute", "args": ["p9", "/extra/x", 1]}, "the node has no port p9"),
        ({"op": "fail", "args": ["cpus: {inventory[cpu][count]}"]}, "cpus: 8"),
    ]:
        with pytest.raises(rule_engine.RuleFailed, match=message):
            rule_engine.apply_rules([{"uuid": "r", "actions": [action]}], _target())


def test_the_ports_a_discovered_node_starts_with() -> None:
    from corral.baremetal.domain import discovery

    inventory = {"interfaces": [{"name": "a", "mac_address": "52:54:00:00:00:01", "ipv4_address": "10.0.0.2"},
                                {"name": "b", "mac_address": "52:54:00:00:00:02"}]}
    hooks = ["ramdisk-error", "validate-interfaces", "ports", "cpus"]
    # The hooks up to ports decide; the CPU count missing fails processing only after the ports are made.
    assert discovery.ports_to_create(inventory, {}, hooks, add_ports="all", disk_spacing=True) == [
        {"address": "52:54:00:00:00:01", "pxe_enabled": True}, {"address": "52:54:00:00:00:02", "pxe_enabled": True}]
    # The ramdisk's error before them: none; after them: they are made first.
    assert discovery.ports_to_create(inventory, {"error": "boom"}, hooks, add_ports="all", disk_spacing=True) == []
    later = ["validate-interfaces", "ports", "ramdisk-error"]
    assert len(discovery.ports_to_create(inventory, {"error": "boom"}, later, add_ports="all", disk_spacing=True)) == 2
    assert discovery.ports_to_create(inventory, {}, ["validate-interfaces"], add_ports="all", disk_spacing=True) == []
    assert discovery.ports_to_create(inventory, {}, hooks, add_ports="disabled", disk_spacing=True) == []
