"""What the agent's deployments read from a node, as upstream reads it.

* The agent ramdisk: ``driver_info/deploy_iso``, else
  ``driver_info/deploy_kernel`` + ``deploy_ramdisk``, else
  ``[conductor] deploy_kernel`` / ``deploy_ramdisk``; each an image of the
  Image service (UUID or ``glance://``) or an http(s)/file URL.  For a
  rescue, ``rescue_iso`` / ``rescue_kernel`` / ``rescue_ramdisk`` likewise.
* Its kernel arguments: ``kernel_append_params`` of the node's
  instance_info, else of its driver_info, else ``[redfish]
  kernel_append_params`` (``%default%`` in the node's value stands for the
  configured one), and the agent's own: ``ipa-api-url`` (``[deploy]
  external_callback_url``, else ``[baremetal_api] public_endpoint``),
  ``boot_method=vmedia`` and, while the node is inspected,
  ``ipa-inspection-callback-url`` (``<API>/v1/continue_inspection``) and
  ``[inspector] extra_kernel_params``.
* Root device hints (``instance_info/root_device``, else
  ``properties/root_device``), checked with upstream's rules; the agent
  reads them from the node itself.
* The config drive: a JSON ``configdrive`` is built into a ``config-2``
  ISO (gzip + base64) when the agent needs it, with the node's UUID and
  name as defaults for ``meta_data``'s ``uuid`` and ``name``.
"""

from __future__ import annotations

import copy
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from oslo_utils import strutils

from corral.baremetal.domain import states
from corral.baremetal.drivers import glance, images
from corral.baremetal.drivers.base import InvalidParameterValue, MissingParameterValue
from corral.core import configdrive as configdrive_iso

# The hints upstream accepts and the type of each.
VALID_ROOT_DEVICE_HINTS: dict[str, type] = {
    "size": int, "model": str, "wwn": str, "serial": str, "vendor": str, "wwn_with_extension": str,
    "wwn_vendor_extension": str, "name": str, "rotational": bool, "hctl": str, "by_path": str,
}
# The operators a hint expression may start with (oslo.utils' specs_matcher), longest first.
_HINT_OPERATORS = ("<range-in>", "<all-in>", "<in>", "<or>", "s==", "s!=", "s<=", "s>=", "s<", "s>", "==", "!=",
                   ">=", "<=", "=", ">", "<")
DEPLOY_IMAGE_FIELDS = ("deploy_kernel", "deploy_ramdisk")
BOOT_MODES = ("uefi", "bios")
# While a node is in these states its agent ramdisk is the rescue one (upstream's RESCUE_LIKE_STATES).
RESCUE_LIKE_STATES = frozenset({"rescuing", "rescue wait", "rescue failed", "unrescuing", "unrescue failed"})


# ---------------------------------------------------------- boot mode


def boot_mode(node: Mapping[str, Any], conf: Any) -> str:
    """The node's boot mode: instance_info, then properties/capabilities, then [deploy] default_boot_mode."""
    mode = (node.get("instance_info") or {}).get("deploy_boot_mode")
    if not mode:
        mode = capabilities(node).get("boot_mode")
    mode = mode or conf.deploy.default_boot_mode
    if mode not in BOOT_MODES:
        raise InvalidParameterValue(f"Invalid boot mode {mode!r} for node {node['uuid']}: use 'uefi' or 'bios'")
    return str(mode)


def capabilities(node: Mapping[str, Any]) -> dict[str, str]:
    """properties/capabilities, given as "key:value,key:value" or as a dictionary."""
    raw = (node.get("properties") or {}).get("capabilities") or {}
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    found = {}
    for item in str(raw).split(","):
        key, _, value = item.partition(":")
        if key.strip():
            found[key.strip()] = value.strip()
    return found


# ------------------------------------------------------- agent ramdisk


def ramdisk_mode(node: Mapping[str, Any]) -> str:
    """"rescue" while the node is being rescued, else "deploy": the prefix of the driver_info fields read."""
    return "rescue" if node.get("provision_state") in RESCUE_LIKE_STATES else "deploy"


def deploy_images(node: Mapping[str, Any], conf: Any, mode: str | None = None) -> dict[str, str]:
    """The agent ramdisk of the node: ``{"deploy_iso": ref}`` or ``{"deploy_kernel": ref, "deploy_ramdisk": ref}``.

    In ``mode`` "rescue" (the default while the node is being rescued) the
    fields are ``rescue_iso``, ``rescue_kernel`` and ``rescue_ramdisk``, with
    ``[conductor] rescue_kernel`` / ``rescue_ramdisk`` as defaults.
    MissingParameterValue names what is missing, as upstream's redfish boot interface does.
    """
    mode = mode or ramdisk_mode(node)
    fields = (f"{mode}_kernel", f"{mode}_ramdisk")
    info = node.get("driver_info") or {}
    if info.get(f"{mode}_iso"):
        return {f"{mode}_iso": str(info[f"{mode}_iso"])}
    found: dict[str, str] = {}
    if any(info.get(field) for field in fields):
        found = {field: info.get(field) for field in fields}
    else:
        found = {field: getattr(conf.conductor, field) for field in fields}
    missing = [field for field in fields if not found.get(field)]
    if missing:
        raise MissingParameterValue(
            "Error validating Redfish virtual media. Some parameters were missing in node's driver_info. "
            f"Missing are: {missing!r}")
    return {field: str(value) for field, value in found.items()}


def check_deploy_images(node: Mapping[str, Any], conf: Any, mode: str | None = None) -> dict[str, str]:
    """The node's agent ramdisk references (keys without their mode prefix: iso, kernel, ramdisk), each checked
    without network access."""
    refs = deploy_images(node, conf, mode)
    for field, ref in refs.items():
        if glance.is_glance_image(ref):
            glance.parse_image_id(ref, field)
        else:
            try:
                images.check_url(ref, field, conf.conductor.file_url_allowed_paths)
            except InvalidParameterValue as error:
                raise InvalidParameterValue(str(error).replace("instance_info/", "driver_info/")) from None
    return {field.split("_", 1)[1]: ref for field, ref in refs.items()}


def kernel_append_params(node: Mapping[str, Any], default: str) -> str:
    """instance_info/kernel_append_params, else driver_info's, else ``default`` (``%default%`` expands to it)."""
    for location in ("instance_info", "driver_info"):
        value = (node.get(location) or {}).get("kernel_append_params")
        if value is None:
            continue
        if not isinstance(value, str) or any(c in value for c in "\n\r\0"):
            raise InvalidParameterValue(f"node's {location}['kernel_append_params'] contains malformed kernel "
                                        "command line")
        return value.replace("%default%", default or "").strip()
    return default or ""


def agent_api_url(conf: Any) -> str:
    """The Bare Metal API as the agent reaches it (the kernel argument ipa-api-url)."""
    url = conf.deploy.external_callback_url or conf.baremetal_api.public_endpoint
    if not url:
        raise MissingParameterValue(
            "The agent on a machine booted from virtual media needs the URL of the Bare Metal API: set [deploy] "
            "external_callback_url (or [baremetal_api] public_endpoint)")
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise InvalidParameterValue(f"[deploy] external_callback_url {url!r} is not an http(s) URL")
    return str(url).rstrip("/")


def agent_kernel_params(node: Mapping[str, Any], conf: Any) -> str:
    """The kernel command line of the agent ramdisk booted from virtual media.

    The agent's own arguments come first; the node's ``kernel_append_params``
    last, so that an operator's value (``ipa-advertise-host=`` ...) wins.
    """
    params = {"ipa-api-url": agent_api_url(conf), "boot_method": "vmedia"}
    inspecting = node.get("provision_state") in (states.INSPECTING, states.INSPECTWAIT)
    if inspecting:
        params["ipa-inspection-callback-url"] = inspection_callback_url(conf)
    if conf.debug:
        params["ipa-debug"] = "1"
    own = " ".join(f"{key}={value}" for key, value in params.items())
    appended = kernel_append_params(node, conf.redfish.kernel_append_params)
    if inspecting and conf.inspector.extra_kernel_params.strip():
        appended = f"{appended} {conf.inspector.extra_kernel_params.strip()}"
    return f"{own} {appended}".strip()


def inspection_callback_url(conf: Any) -> str:
    """Where the agent posts the inventory (the kernel argument ipa-inspection-callback-url)."""
    base = conf.inspector.callback_endpoint_override
    if base and urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise InvalidParameterValue(f"[inspector] callback_endpoint_override {base!r} is not an http(s) URL")
    return f"{str(base).rstrip('/') if base else agent_api_url(conf)}/v1/continue_inspection"


# --------------------------------------------------- root device hints


def _hint_operator_and_values(expression: Any, name: str) -> tuple[str, list[str]]:
    """The operator of a hint expression (oslo.utils' specs_matcher's) and its values, lower case."""
    text = str(expression).strip().lower()
    if not text:
        raise ValueError(f'Root device hint "{name}" expression is empty')
    for operator in _HINT_OPERATORS:
        if text.startswith(operator):
            values = text.split(operator) if operator == "<or>" else ["", text[len(operator):]]
            return operator, [value.strip() for value in values if value.strip()]
    return "", [text]


def check_root_device_hints(hints: Any) -> None:
    """Upstream's rules for root device hints (ValueError says what is wrong)."""
    if not isinstance(hints, Mapping):
        raise ValueError("Root device hints must be a dictionary")
    invalid = [name for name in hints if name not in VALID_ROOT_DEVICE_HINTS]
    if invalid:
        raise ValueError(f'The hints "{", ".join(invalid)}" are invalid. Valid hints are: '
                         f'"{", ".join(VALID_ROOT_DEVICE_HINTS)}"')
    for name, expression in copy.deepcopy(dict(hints)).items():
        kind = VALID_ROOT_DEVICE_HINTS[name]
        operator, values = _hint_operator_and_values(expression, name)
        if name == "size" and operator == "<range-in>":
            continue
        if kind is str:
            if not isinstance(expression, str):
                raise ValueError(f'Root device hint "{name}" is not a string value. Hint expression: {expression}')
        elif kind is int:
            for value in values:
                try:
                    number = int(value)
                except ValueError:
                    raise ValueError(f'Root device hint "{name}" is not an integer value. Current value: '
                                     f"{expression}") from None
                if number <= 0:
                    raise ValueError(f'Root device hint "{name}" should be a positive integer. Current value: '
                                     f"{expression}")
        elif kind is bool:
            try:
                strutils.bool_from_string(expression, strict=True)
            except ValueError:
                raise ValueError(f'Root device hint "{name}" is not a Boolean value. Current value: '
                                 f"{expression}") from None


def root_device_for_deploy(node: Mapping[str, Any]) -> Any:
    """The node's root device hints (instance_info first), checked; None when it has none."""
    hints = (node.get("instance_info") or {}).get("root_device")
    source = "instance_info"
    if not hints:
        hints = (node.get("properties") or {}).get("root_device")
        source = "properties"
    if not hints:
        return None
    try:
        check_root_device_hints(hints)
    except ValueError as error:
        raise InvalidParameterValue(
            f"Failed to validate the root device hints {hints} (from the node's {source}) for node "
            f"{node['uuid']}: {error}") from None
    return hints


# -------------------------------------------------------- config drive


def check_configdrive_size(configdrive: Any, node_uuid: str) -> None:
    """A config drive larger than the agent takes is refused (InvalidParameterValue, in the agent's words).

    A gzip + base64 string is measured by decompressing it (never more than
    the limit); a JSON object by the files it would hold; a URL is the
    agent's to fetch.
    """
    if isinstance(configdrive, Mapping):
        size = sum(len(content) for content in configdrive_iso.files(*_configdrive_parts(configdrive, {})).values())
    elif isinstance(configdrive, str) and "://" not in configdrive:
        try:
            size = configdrive_iso.decoded_size(configdrive, configdrive_iso.MAX_SIZE)
        except configdrive_iso.ConfigDriveError as error:
            raise InvalidParameterValue(f"Invalid configdrive format: {error}") from None
    else:
        return
    if size > configdrive_iso.MAX_SIZE:
        raise InvalidParameterValue(
            "Config drive size exceeds maximum limit of 64MiB. Size of the given config drive is "
            f"{-(-size // (1024 * 1024))} MiB for node {node_uuid}.")


def _configdrive_parts(configdrive: Mapping[str, Any], defaults: Mapping[str, Any]
                       ) -> tuple[dict[str, Any], bytes | None, Any, Any]:
    meta_data = dict(configdrive.get("meta_data") or {})
    for key, value in defaults.items():
        if value:
            meta_data.setdefault(key, value)
    user_data = configdrive.get("user_data")
    if isinstance(user_data, (dict, list)):
        user_data = json.dumps(user_data).encode()
    elif isinstance(user_data, str):
        user_data = user_data.encode()
    return meta_data, user_data or None, configdrive.get("network_data"), configdrive.get("vendor_data")


def configdrive_image(node: Mapping[str, Any]) -> str | None:
    """The node's config drive as the agent takes it: gzip + base64 or a URL (a JSON one is built here)."""
    configdrive = (node.get("instance_info") or {}).get("configdrive")
    if not configdrive:
        return None
    if isinstance(configdrive, Mapping):
        parts = _configdrive_parts(configdrive, {"uuid": node["uuid"], "name": node.get("name")})
        return configdrive_iso.encode(configdrive_iso.build(*parts))
    return str(configdrive)


def mask_configdrive(info: Mapping[str, Any]) -> dict[str, Any]:
    masked = dict(info)
    if masked.get("configdrive"):
        masked["configdrive"] = "******"
    return masked


# ------------------------------------------------------ partition images

IMAGE_TYPE_PARTITION = "partition"
IMAGE_TYPE_WHOLE_DISK = "whole-disk"
VALID_IMAGE_TYPES = (IMAGE_TYPE_PARTITION, IMAGE_TYPE_WHOLE_DISK)
# The instance_info fields upstream hands the agent with a partition image (image_info).
PARTITION_IMAGE_LABELS = ("kernel", "ramdisk", "root_gb", "root_mb", "swap_mb", "ephemeral_mb", "ephemeral_format",
                          "configdrive", "preserve_ephemeral", "image_type", "deploy_boot_mode")
DISK_LAYOUT_PARAMS = ("root_gb", "swap_mb", "ephemeral_gb")
# driver_internal_info keys that describe the deployed instance; they go when it is torn down.
INSTANCE_INTERNAL_KEYS = ("root_uuid_or_disk_id", "is_whole_disk_image", "deploy_boot_mode")


def check_image_type(instance_info: Mapping[str, Any]) -> None:
    image_type = instance_info.get("image_type")
    if image_type and image_type not in VALID_IMAGE_TYPES:
        raise InvalidParameterValue(f'Invalid image_type "{image_type}", valid are {", ".join(VALID_IMAGE_TYPES)}')


def is_whole_disk_image(instance_info: Mapping[str, Any], glance_image: Mapping[str, Any] | None = None) -> bool:
    """Upstream's rule: ``image_type`` when given; else an Image service image is a partition image when its
    ``img_type`` says so or it names a ``kernel_id`` or ``ramdisk_id``; an image by URL when instance_info names
    a ``kernel`` or ``ramdisk``."""
    image_type = instance_info.get("image_type")
    if image_type:
        return bool(image_type != IMAGE_TYPE_PARTITION)
    if glance_image is not None:
        if glance_image.get("img_type"):
            return bool(glance_image["img_type"] != IMAGE_TYPE_PARTITION)
        return not glance_image.get("kernel_id") and not glance_image.get("ramdisk_id")
    return not instance_info.get("kernel") and not instance_info.get("ramdisk")


def partition_layout(instance_info: Mapping[str, Any], default_ephemeral_format: str) -> dict[str, Any]:
    """The disk layout of a partition image, from instance_info, checked as upstream's parse_instance_info:
    ``root_gb`` is required; ``swap_mb`` and ``ephemeral_gb`` default to 0; sizes must be integers."""
    if not instance_info.get("root_gb"):
        raise MissingParameterValue("Some parameters were missing in node's instance_info. Missing are: ['root_gb']")
    preserve = instance_info.get("preserve_ephemeral", False)
    try:
        preserve_ephemeral = strutils.bool_from_string(preserve, strict=True)
    except ValueError as error:
        raise InvalidParameterValue(f"Invalid parameter preserve_ephemeral: {error}") from None
    values = {"root_gb": instance_info["root_gb"], "swap_mb": instance_info.get("swap_mb", 0),
              "ephemeral_gb": instance_info.get("ephemeral_gb", 0)}
    sizes: dict[str, int] = {}
    for param in DISK_LAYOUT_PARAMS:
        try:
            sizes[param] = int(values[param])
        except (TypeError, ValueError):
            raise InvalidParameterValue(f"Invalid parameter {param}: {values[param]} is not an integer "
                                        "value.") from None
        if sizes[param] < 0:
            raise InvalidParameterValue(f"Invalid parameter {param}: {values[param]} is negative.")
    ephemeral_format = instance_info.get("ephemeral_format")
    if sizes["ephemeral_gb"] and not ephemeral_format:
        ephemeral_format = default_ephemeral_format
    return {"root_gb": sizes["root_gb"], "root_mb": 1024 * sizes["root_gb"], "swap_mb": sizes["swap_mb"],
            "ephemeral_gb": sizes["ephemeral_gb"], "ephemeral_mb": 1024 * sizes["ephemeral_gb"],
            "ephemeral_format": ephemeral_format, "preserve_ephemeral": preserve_ephemeral}


def disk_label(node: Mapping[str, Any], boot_mode: str) -> str | None:
    """The partition table asked for (``disk_label`` capability of instance_info); gpt for UEFI, as upstream."""
    capabilities = (node.get("instance_info") or {}).get("capabilities") or {}
    if isinstance(capabilities, str):
        try:
            capabilities = json.loads(capabilities)
        except ValueError:
            raise InvalidParameterValue("instance_info/capabilities is not a JSON object") from None
    label = capabilities.get("disk_label") if isinstance(capabilities, Mapping) else None
    if label is None and boot_mode == "uefi":
        label = "gpt"
    return label
