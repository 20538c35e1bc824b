"""Checking inspection rules (1.96) as upstream does when they are stored.

A rule is a list of conditions (operators, optionally inverted with ``!``)
and a list of actions, each ``{"op": ..., "args": [...] | {...}}``. Each
operator and action takes named arguments; a list of arguments fills the
required ones in order, then the optional ones. Corral's inspection is out
of band (the fake and Redfish inspect interfaces), where upstream does not
run these rules either: they are stored, checked and served.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.errors import BadRequest

PHASES = ("main",)
MAX_PRIORITY = 9999

# name -> (required arguments, optional arguments), upstream's signatures.
OPERATORS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "eq": (("values",), ("force_strings",)),
    "lt": (("values",), ("force_strings",)),
    "gt": (("values",), ("force_strings",)),
    "is-empty": (("value",), ()),
    "in-net": (("address", "subnet"), ()),
    "matches": (("value", "regex"), ()),
    "contains": (("value", "regex"), ()),
    "one-of": (("value",), ("values",)),
    "is-none": (("value",), ()),
    "is-true": (("value",), ()),
    "is-false": (("value",), ()),
}

# Actions that also receive the inspection's plugin data (not given by users).
_PLUGIN_DATA = ("plugin_data",)
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "fail": (("msg",), ()),
    "log": (("msg",), ("level",)),
    "set-attribute": (("path", "value"), ()),
    "extend-attribute": (("path", "value"), ("unique",)),
    "del-attribute": (("path",), ()),
    "set-capability": (("name", "value"), ()),
    "unset-capability": (("name",), ()),
    "add-trait": (("name",), ()),
    "remove-trait": (("name",), ()),
    "set-plugin-data": (("path", "value", *_PLUGIN_DATA), ()),
    "extend-plugin-data": (("path", "value", *_PLUGIN_DATA), ("unique",)),
    "unset-plugin-data": (("path", *_PLUGIN_DATA), ()),
    "set-port-attribute": (("port_id", "path", "value"), ()),
    "extend-port-attribute": (("port_id", "path", "value"), ("unique",)),
    "del-port-attribute": (("port_id", "path"), ()),
    "api-call": (("url",), ("headers", "proxies", "timeout", "retries", "backoff_factor")),
}


def schema() -> dict[str, Any]:
    """The JSON schema of a rule body (upstream's)."""
    condition_ops = [*OPERATORS, *(f"!{name}" for name in OPERATORS)]
    return {
        "type": "object",
        "properties": {
            "uuid": {"type": ["string", "null"]},
            "priority": {"type": "integer", "minimum": 0},
            "description": {"type": ["string", "null"], "maxLength": 255},
            "sensitive": {"type": ["boolean", "null"]},
            "phase": {"type": ["string", "null"], "maxLength": 16},
            "conditions": {
                "type": "array", "minItems": 0,
                "items": {
                    "type": "object", "required": ["op", "args"],
                    "properties": {"op": {"enum": condition_ops}, "args": {"type": ["array", "object"]},
                                   "multiple": {"enum": ["any", "all", "first", "last"]},
                                   "loop": {"type": ["array", "object"]}},
                    "additionalProperties": True,
                },
            },
            "actions": {
                "type": "array", "minItems": 1,
                "items": {
                    "type": "object", "required": ["op", "args"],
                    "properties": {"op": {"enum": list(ACTIONS)}, "args": {"type": ["array", "object"]},
                                   "loop": {"type": ["array", "object"]}},
                    "additionalProperties": True,
                },
            },
        },
        "required": ["actions"],
        "additionalProperties": False,
    }


def _argument_errors(signature: tuple[tuple[str, ...], tuple[str, ...]], args: Any) -> list[str]:
    required, optional = signature
    plugin_data = "plugin_data" in required
    if isinstance(args, list):
        given = list(args) + ([{}] if plugin_data else [])
        if len(given) < len(required):
            return [f"missing required argument(s): {', '.join(required[len(given):])}"]
        named = dict(zip(required, given))
        named.update(zip(optional, given[len(required):]))
        # Extra list items beyond the signature are dropped, as upstream does.
        return []
    named = dict(args)
    if plugin_data:
        named["plugin_data"] = {}
    errors = []
    missing = [name for name in required if name not in named]
    unexpected = sorted(set(named) - set(required) - set(optional))
    if missing:
        errors.append(f"missing required argument(s): {', '.join(missing)}")
    if unexpected:
        errors.append(f"unexpected argument(s): {', '.join(unexpected)}")
    return ["; ".join(errors)] if errors else []


def check(rule: Mapping[str, Any]) -> None:
    """Raise 400 with upstream's words when a schema-valid rule cannot be used."""
    errors = []
    phase = rule.get("phase") or "main"
    if phase not in PHASES:
        errors.append(f"Invalid phase: {phase}. Valid phases are: {', '.join(PHASES)}")
    if rule.get("priority", 0) > MAX_PRIORITY:
        errors.append("Priority must be between 0 and 9999 for user-defined rules.")
    for condition in rule.get("conditions") or []:
        op = condition["op"].lstrip("!")
        for error in _argument_errors(OPERATORS[op], condition["args"]):
            errors.append(f"Invalid parameters for condition operator {op}: {error}")
    for action in rule["actions"]:
        for error in _argument_errors(ACTIONS[action["op"]], action["args"]):
            errors.append(f"Invalid parameters for action operator {action['op']}: {error}")
    if len(errors) == 1:
        raise BadRequest(errors[0])
    if errors:
        raise BadRequest(f"Multiple validation errors occurred: {'; '.join(errors)}")


def shown_conditions(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conditions as upstream answers them: ``loop`` and ``multiple`` only with a loop."""
    shown = []
    for condition in conditions:
        item = {"op": condition["op"], "args": condition["args"]}
        if condition.get("loop"):
            item["loop"] = condition["loop"]
            item["multiple"] = condition.get("multiple", "any")
        shown.append(item)
    return shown


def shown_actions(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Actions as upstream answers them: ``loop`` only when there is one."""
    shown = []
    for action in actions:
        item = {"op": action["op"], "args": action["args"]}
        if action.get("loop"):
            item["loop"] = action["loop"]
        shown.append(item)
    return shown
