"""Running inspection rules (1.96) on what inspection found.

Rules run by priority, highest first.  A rule whose conditions all hold
(none: always) runs its actions in order.  Arguments are interpolated:
``"{inventory[cpu][count]}"`` (the whole argument one reference) keeps the
value's type, references inside longer text are formatted as text.  The
names are ``node`` (the node's fields), ``inventory``, ``plugin_data`` and,
in a loop, ``item``; ``[key]`` and ``.key`` both index.  A reference to
something missing is None.

Actions change a :class:`Target` (the node's fields, traits, plugin data and
ports), which the conductor writes afterwards; ``fail`` stops inspection with
its message.  ``api-call`` is not performed: a conductor makes no requests to
addresses that rules name.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.baremetal.domain.inspection_rules import ACTIONS, OPERATORS

LOG = logging.getLogger(__name__)

# Node fields rules may change (those a PATCH may change that describe the hardware).
WRITABLE_FIELDS = frozenset({"properties", "extra", "driver_info", "instance_info", "resource_class", "description",
                             "name", "driver", "owner", "lessee", "conductor_group", "automated_clean",
                             "retired", "retired_reason", "network_data", "shard", "parent_node"})
_REFERENCE = re.compile(r"\{([A-Za-z_][^{}]*)\}")
_ACCESSOR = re.compile(r"\.([A-Za-z0-9_-]+)|\[([^\[\]]*)\]")
_TRUE = ("true", "yes", "1", "on", "y", "t")


class RuleFailed(Exception):
    """A ``fail`` action ran, or an action could not be applied; the message is the node's last_error."""


@dataclass
class Target:
    node: dict[str, Any]
    traits: set[str]
    plugin_data: dict[str, Any]
    inventory: Mapping[str, Any]
    # Existing and new ports, by MAC address.
    ports: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed_ports: set[str] = field(default_factory=set)

    def context(self, item: Any = None) -> dict[str, Any]:
        return {"node": self.node, "inventory": self.inventory, "plugin_data": self.plugin_data, "item": item}


def apply_rules(rules: list[Mapping[str, Any]], target: Target) -> list[str]:
    """Run every matching rule on ``target``; the UUIDs of the rules that ran."""
    ran = []
    for rule in sorted(rules, key=lambda r: (-int(r.get("priority") or 0), str(r.get("uuid")))):
        if not _conditions_hold(rule, target):
            continue
        for action in rule.get("actions") or []:
            for item in action.get("loop") or [None]:
                _run_action(action, target, item, rule)
        ran.append(str(rule.get("uuid")))
        if not rule.get("sensitive"):
            LOG.info("inspection rule %s ran on node %s", rule.get("uuid"), target.node.get("uuid"))
    return ran


# ------------------------------------------------------------ values


def resolve(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _REFERENCE.fullmatch(value)
        if whole:
            return _lookup(whole.group(1), context)
        return _REFERENCE.sub(lambda match: str(_lookup(match.group(1), context)), value)
    if isinstance(value, list):
        return [resolve(item, context) for item in value]
    if isinstance(value, Mapping):
        return {key: resolve(item, context) for key, item in value.items()}
    return value


def _lookup(expression: str, context: Mapping[str, Any]) -> Any:
    root = re.match(r"[A-Za-z_][A-Za-z0-9_]*", expression)
    if root is None or root.group(0) not in context:
        return None
    current = context[root.group(0)]
    rest = expression[root.end():]
    position = 0
    for match in _ACCESSOR.finditer(rest):
        if match.start() != position:
            return None
        position = match.end()
        key = match.group(1) if match.group(1) is not None else match.group(2).strip("'\"")
        if isinstance(current, list) and key.lstrip("-").isdigit():
            index = int(key)
            current = current[index] if -len(current) <= index < len(current) else None
        elif isinstance(current, Mapping):
            current = current.get(key)
        else:
            return None
    return current if position == len(rest) else None


def _named(signature: tuple[tuple[str, ...], tuple[str, ...]], args: Any) -> dict[str, Any]:
    required, optional = signature
    names = [name for name in (*required, *optional) if name != "plugin_data"]
    if isinstance(args, list):
        return dict(zip(names, args))
    return {key: value for key, value in dict(args).items() if key != "plugin_data"}


# -------------------------------------------------------- conditions


def _conditions_hold(rule: Mapping[str, Any], target: Target) -> bool:
    for condition in rule.get("conditions") or []:
        loop = condition.get("loop")
        if not loop:
            if not _check(condition, target.context()):
                return False
            continue
        results = [_check(condition, target.context(item)) for item in loop]
        multiple = condition.get("multiple", "any")
        held = {"any": any(results), "all": all(results), "first": results[0], "last": results[-1]}[multiple]
        if not held:
            return False
    return True


def _check(condition: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    op = str(condition["op"])
    inverted = op.startswith("!")
    name = op.lstrip("!")
    args = resolve(condition.get("args"), context)
    if name in ("eq", "lt", "gt"):
        if isinstance(args, list):
            values, force = list(args), False
        else:
            values, force = list(args.get("values") or []), bool(args.get("force_strings"))
        result = _compare(name, values, force)
    else:
        result = _OPERATORS[name](**_named(OPERATORS[name], args))
    return result != inverted


def _compare(name: str, values: list[Any], force_strings: bool) -> bool:
    if force_strings:
        values = [str(value) for value in values]
    pairs = list(zip(values, values[1:]))
    try:
        if name == "eq":
            return all(a == b for a, b in pairs)
        if name == "lt":
            return all(a < b for a, b in pairs)
        return all(a > b for a, b in pairs)
    except TypeError:
        return False


def _in_net(address: Any, subnet: Any) -> bool:
    try:
        return ipaddress.ip_address(str(address)) in ipaddress.ip_network(str(subnet), strict=False)
    except ValueError:
        return False


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in _TRUE) or value == 1


def _falsy(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() in ("false", "no", "0", "off", "n",
                                                                                     "f")) or value == 0


_OPERATORS: dict[str, Any] = {
    "is-empty": lambda value: value in (None, "", [], {}),
    "in-net": _in_net,
    "matches": lambda value, regex: value is not None and re.fullmatch(str(regex), str(value)) is not None,
    "contains": lambda value, regex: value is not None and re.search(str(regex), str(value)) is not None,
    "one-of": lambda value, values=(): value in (values or ()),
    "is-none": lambda value: value is None,
    "is-true": _truthy,
    "is-false": _falsy,
}


# ----------------------------------------------------------- actions


def _run_action(action: Mapping[str, Any], target: Target, item: Any, rule: Mapping[str, Any]) -> None:
    op = str(action["op"])
    args = _named(ACTIONS[op], resolve(action.get("args"), target.context(item)))
    if op == "fail":
        raise RuleFailed(str(args.get("msg")))
    if op == "log":
        level = getattr(logging, str(args.get("level") or "info").upper(), logging.INFO)
        LOG.log(level, "inspection rule %s on node %s: %s", rule.get("uuid"), target.node.get("uuid"),
                "(sensitive)" if rule.get("sensitive") else args.get("msg"))
        return
    if op == "api-call":
        LOG.warning("inspection rule %s: api-call actions are not performed by this service", rule.get("uuid"))
        return
    try:
        _ACTIONS[op](target, **args)
    except (KeyError, TypeError, ValueError) as error:
        raise RuleFailed(f"Inspection rule {rule.get('uuid')} failed in action {op}: {error}") from None


def _split(path: Any) -> list[str]:
    parts = [part for part in re.split(r"[/.]", str(path)) if part]
    if not parts:
        raise ValueError(f"empty path {path!r}")
    return parts


def _node_path(target: Target, path: Any) -> tuple[dict[str, Any], str]:
    """The dictionary holding the attribute ``path`` names, and its last key (created on the way)."""
    parts = _split(path)
    if parts[0] not in WRITABLE_FIELDS:
        raise ValueError(f"the node field {parts[0]!r} cannot be changed by inspection rules")
    return _container(target.node, parts)


def _container(root: dict[str, Any], parts: list[str]) -> tuple[dict[str, Any], str]:
    current = root
    for part in parts[:-1]:
        if not isinstance(current.get(part), dict):
            current[part] = {}
        current = current[part]
    return current, parts[-1]


def _set(holder: tuple[dict[str, Any], str], value: Any) -> None:
    container, key = holder
    container[key] = copy.deepcopy(value)


def _extend(holder: tuple[dict[str, Any], str], value: Any, unique: Any = False) -> None:
    container, key = holder
    current = list(container.get(key) or [])
    if not (_truthy(unique) and value in current):
        current.append(copy.deepcopy(value))
    container[key] = current


def _delete(holder: tuple[dict[str, Any], str]) -> None:
    container, key = holder
    container.pop(key, None)


def _capabilities(target: Target) -> dict[str, str]:
    properties = target.node.setdefault("properties", {})
    raw = properties.get("capabilities") or ""
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    return dict(item.split(":", 1) for item in str(raw).split(",") if ":" in item)


def _store_capabilities(target: Target, capabilities: dict[str, str]) -> None:
    target.node["properties"]["capabilities"] = ",".join(f"{k}:{v}" for k, v in capabilities.items())


def _set_capability(target: Target, name: Any, value: Any) -> None:
    found = _capabilities(target)
    found[str(name)] = str(value)
    _store_capabilities(target, found)


def _unset_capability(target: Target, name: Any) -> None:
    found = _capabilities(target)
    found.pop(str(name), None)
    _store_capabilities(target, found)


def _port(target: Target, port_id: Any) -> tuple[str, dict[str, Any]]:
    wanted = str(port_id).lower()
    for mac, port in target.ports.items():
        if wanted in (mac, str(port.get("uuid") or "").lower()):
            return mac, port
    raise ValueError(f"the node has no port {port_id}")


def _port_action(change: Any) -> Any:
    def act(target: Target, port_id: Any, path: Any, *rest: Any, **named: Any) -> None:
        mac, port = _port(target, port_id)
        change(_container(port, _split(path)), *rest, **named)
        target.changed_ports.add(mac)
    return act


_ACTIONS: dict[str, Any] = {
    "set-attribute": lambda t, path, value: _set(_node_path(t, path), value),
    "extend-attribute": lambda t, path, value, unique=False: _extend(_node_path(t, path), value, unique),
    "del-attribute": lambda t, path: _delete(_node_path(t, path)),
    "set-capability": _set_capability,
    "unset-capability": _unset_capability,
    "add-trait": lambda t, name: t.traits.add(str(name)),
    "remove-trait": lambda t, name: t.traits.discard(str(name)),
    "set-plugin-data": lambda t, path, value: _set(_container(t.plugin_data, _split(path)), value),
    "extend-plugin-data": lambda t, path, value, unique=False: _extend(_container(t.plugin_data, _split(path)),
                                                                       value, unique),
    "unset-plugin-data": lambda t, path: _delete(_container(t.plugin_data, _split(path))),
    "set-port-attribute": _port_action(lambda holder, value: _set(holder, value)),
    "extend-port-attribute": _port_action(lambda holder, value, unique=False: _extend(holder, value, unique)),
    "del-port-attribute": _port_action(lambda holder: _delete(holder)),
}
