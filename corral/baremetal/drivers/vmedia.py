"""Booting from Redfish virtual media, and the ``ramdisk`` deploy interface.

``redfish-virtual-media`` (boot) inserts an ISO image into the BMC's
virtual CD drive (``VirtualMedia.InsertMedia``) and makes the system boot
from it in the node's boot mode; it ejects the medium when the instance is
torn down, and when preparing it failed.

For the agent (``direct`` deploy, cleaning) it boots the agent ramdisk: an
ISO made from ``deploy_kernel`` + ``deploy_ramdisk`` with the kernel
arguments the agent needs (see :mod:`corral.baremetal.drivers.deploy_utils`),
or a prebuilt ``deploy_iso`` (for a rescue: ``rescue_kernel`` +
``rescue_ramdisk`` or ``rescue_iso``).  Once the agent wrote the image, the medium
is ejected and the system boots from its disk.

``ramdisk`` (deploy) boots the instance from memory instead of writing an
image to disk ("Booting a Ramdisk or an ISO"): ``instance_info/boot_iso``
names an ISO image, or ``instance_info/kernel`` + ``ramdisk`` name a kernel
and an initramfs that the conductor makes into an ISO (with
``[redfish] kernel_append_params`` and ``instance_info/ramdisk_kernel_arguments``
as the kernel command line).  Each is a URL, or an image of the Image
service by UUID or ``glance://<uuid>`` (:mod:`corral.baremetal.drivers.glance`).
The node becomes ``active`` once it was powered on from the medium;
undeploying powers it off and ejects the medium.

Images the BMC is to fetch are published under ``[deploy] http_root`` and
given to it as URLs under the node's ``driver_info/external_http_url``,
else ``[deploy] external_http_url``, else ``[deploy] http_url`` (the
conductor's own file server unless configured otherwise).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import sushy

from corral.baremetal.domain import states
from corral.baremetal.drivers import deploy_utils, glance, images, iso
from corral.baremetal.drivers.base import (
    BaseInterface,
    DriverError,
    InvalidParameterValue,
    MissingParameterValue,
    deploy_step,
)
from corral.baremetal.drivers.redfish import BOOT_MODES, _driver_info, _sushy_call, get_system

LOG = logging.getLogger(__name__)

# Redfish media types a virtual CD drive reports.
CD_MEDIA_TYPES = ("CD", "DVD")
# Where published images live, under http_root and http_url.
PUBLISH_DIR = "redfish"


# The node's boot mode and capabilities, as the agent's deploy reads them too.
boot_mode = deploy_utils.boot_mode
capabilities = deploy_utils.capabilities


def published_path(conf: Any, node: Mapping[str, Any]) -> str:
    return os.path.join(conf.deploy.http_root, PUBLISH_DIR, f"boot-{node['uuid']}.iso")


def published_url(task: Any) -> str:
    return bmc_url(task, f"{PUBLISH_DIR}/boot-{task.node['uuid']}.iso")


def bmc_url(task: Any, relative: str) -> str:
    """The URL at which the node's BMC fetches ``<[deploy] http_root>/<relative>``."""
    base = ((task.node.get("driver_info") or {}).get("external_http_url")
            or task.conductor.conf.deploy.external_http_url)
    if not base:
        return images.served_url(task, relative)
    return f"{str(base).rstrip('/')}/{relative}"


def boots_ramdisk_instance(task: Any) -> bool:
    """Whether the instance itself is booted from the virtual CD (upstream's boot option "ramdisk")."""
    return isinstance(task.driver.deploy, RamdiskDeploy)


def webserver_verify(conf: Any) -> bool | str:
    """``[DEFAULT] webserver_verify_ca`` as requests takes it: a boolean or a CA bundle path."""
    value = str(conf.webserver_verify_ca).strip()
    if value.lower() in ("true", "yes", "1", "on"):
        return True
    if value.lower() in ("false", "no", "0", "off"):
        return False
    return value


def _cd_drive(system: Any) -> Any:
    """The system's virtual CD drive (System VirtualMedia, else its managers')."""
    collections = []
    with contextlib.suppress(sushy.exceptions.SushyError, AttributeError):
        collections.append(system.virtual_media)
    with contextlib.suppress(sushy.exceptions.SushyError, AttributeError):
        collections.extend(manager.virtual_media for manager in system.managers)
    for collection in collections:
        try:
            members = collection.get_members()
        except sushy.exceptions.SushyError:
            continue
        for device in members:
            if any(str(t).upper().split(".")[-1] in CD_MEDIA_TYPES or str(getattr(t, "value", t)) in CD_MEDIA_TYPES
                   for t in device.media_types or ()):
                return device
    raise DriverError("The BMC offers no virtual CD drive (VirtualMedia with media type CD or DVD)")


class RedfishVirtualMediaBoot(BaseInterface):
    interface_type = "boot"
    name = "redfish-virtual-media"
    capabilities = ("ramdisk_boot",)

    def validate(self, task: Any) -> None:
        _driver_info(task)
        boot_mode(task.node, self.conf)
        if not boots_ramdisk_instance(task):
            # The agent's ramdisk is booted from this medium: it must be known, and the agent given the API.
            refs = deploy_utils.check_deploy_images(task.node, self.conf)
            if "iso" not in refs:
                deploy_utils.agent_kernel_params(task.node, self.conf)

    def validate_rescue(self, task: Any) -> None:
        """The rescue ramdisk must be known (``rescue_iso``, or ``rescue_kernel`` + ``rescue_ramdisk``)."""
        refs = deploy_utils.check_deploy_images(task.node, self.conf, "rescue")
        if "iso" not in refs:
            deploy_utils.agent_kernel_params(task.node, self.conf)

    # --------------------------------------------------- agent ramdisk

    def prepare_ramdisk(self, task: Any) -> None:
        """Boot the agent ramdisk at the next power-on: its ISO in the virtual CD drive, the CD once.

        The ISO is fetched or made before the machine is touched, then the
        machine is powered off and the medium inserted.
        """
        iso_url = self.prepare_ramdisk_image(task)
        try:
            power = task.driver.power
            if power.get_power_state(task) != states.POWER_OFF:
                power.set_power_state(task, states.POWER_OFF)
            task.update(power_state=states.POWER_OFF)
            system = get_system(task, self.conf)
        except Exception:
            self.unpublish(task)
            raise
        try:
            self.boot_from_cd(task, system, iso_url, persistent=False)
        except Exception:
            self._eject(system)
            self.unpublish(task)
            raise

    def prepare_ramdisk_image(self, task: Any) -> str:
        """The URL the BMC fetches the agent ramdisk's ISO from (a prebuilt deploy_iso, or one made here)."""
        mode = deploy_utils.ramdisk_mode(task.node)
        refs = deploy_utils.check_deploy_images(task.node, self.conf, mode)
        verify_tls = webserver_verify(self.conf)
        cache = images.ImageCache.from_conf(self.conf)
        target = published_path(self.conf, task.node)
        if "iso" in refs:
            ref = refs["iso"]
            if glance.is_glance_image(ref):
                image = glance.usable_image(self.conf, ref, f"{mode}_iso", None)
                images.publish(glance.fetch(self.conf, cache, image), target)
                return published_url(task)
            if self.conf.deploy.ramdisk_image_download_source == "http" and ref.startswith(("http:", "https:")):
                return ref
            images.publish(cache.fetch(ref, None, verify_tls=verify_tls), target)
            return published_url(task)
        kernel = self._fetch(refs["kernel"], f"{mode}_kernel", cache, verify_tls)
        ramdisk = self._fetch(refs["ramdisk"], f"{mode}_ramdisk", cache, verify_tls)
        params = deploy_utils.agent_kernel_params(task.node, self.conf)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        iso.build_iso(self.conf, kernel, ramdisk, params, boot_mode(task.node, self.conf), target)
        return published_url(task)

    def _fetch(self, ref: str, field: str, cache: images.ImageCache, verify_tls: bool | str) -> str:
        """The cached copy of a driver_info image: of the Image service (verified) or at a URL."""
        if glance.is_glance_image(ref):
            return glance.fetch(self.conf, cache, glance.usable_image(self.conf, ref, field, None))
        return cache.fetch(ref, None, verify_tls=verify_tls)

    def clean_up_ramdisk(self, task: Any) -> None:
        """Eject the agent ramdisk's medium and withdraw its ISO."""
        try:
            self._eject(get_system(task, self.conf), strict=True)
        finally:
            self.unpublish(task)

    # -------------------------------------------------------- instance

    def prepare_instance(self, task: Any, iso_url: str | None = None) -> None:
        """Boot the instance at the next power-on.

        The ``ramdisk`` deploy: its ISO goes into the virtual CD drive and
        the CD becomes the boot device (``iso_url`` is what
        :meth:`prepare_instance_image` returned, when the caller prepared the
        image first).  Otherwise the image is on the disk: the agent
        ramdisk's medium is ejected and the disk becomes the boot device.
        """
        if not boots_ramdisk_instance(task):
            system = get_system(task, self.conf)
            self._eject(system, strict=True)
            self.unpublish(task)
            self._sync_boot_mode(task, system, boot_mode(task.node, self.conf))
            _sushy_call("boot from disk", system.set_system_boot_options, sushy.BootSource.HDD,
                        enabled=sushy.BootSourceOverrideEnabled.CONTINUOUS)
            LOG.info("node %s boots from its disk", task.node["uuid"])
            return
        if iso_url is None:
            iso_url = self.prepare_instance_image(task)
        system = get_system(task, self.conf)
        try:
            self.boot_from_cd(task, system, iso_url, persistent=True)
        except Exception:
            self._eject(system)
            self.unpublish(task)
            raise

    def boot_from_cd(self, task: Any, system: Any, iso_url: str, *, persistent: bool = False) -> None:
        """Insert ``iso_url`` (after ejecting what was inserted) and set the CD as boot device."""
        mode = boot_mode(task.node, self.conf)
        drive = _cd_drive(system)
        if drive.inserted or drive.image:
            _sushy_call("virtual media eject", drive.eject_media)
        _sushy_call("virtual media insertion", drive.insert_media, iso_url, inserted=True, write_protected=True)
        enabled = (sushy.BootSourceOverrideEnabled.CONTINUOUS if persistent
                   else sushy.BootSourceOverrideEnabled.ONCE)
        self._sync_boot_mode(task, system, mode)
        _sushy_call("boot from virtual CD", system.set_system_boot_options, sushy.BootSource.CD, enabled=enabled)
        LOG.info("node %s boots %s from virtual CD (%s mode)", task.node["uuid"], iso_url, mode)

    def _sync_boot_mode(self, task: Any, system: Any, mode: str) -> None:
        """Switch the system to ``mode`` unless it is already in it.

        A BMC that does not report its mode may also be unable to change it
        (sushy-tools' BIOS machines): then the machine boots in its own mode.
        """
        current = system.boot.mode
        if current == BOOT_MODES[mode]:
            return
        try:
            _sushy_call("set boot mode", system.set_system_boot_options, mode=BOOT_MODES[mode])
        except DriverError as error:
            if current is not None:
                raise
            LOG.warning("node %s: the BMC reports no boot mode and did not accept %s (%s); booting in the "
                        "system's own mode", task.node["uuid"], mode, error)
        _sushy_call("read boot settings", system.refresh)

    def clean_up_instance(self, task: Any) -> None:
        """Eject the medium and withdraw the published image."""
        self._eject(get_system(task, self.conf), strict=True)
        self.unpublish(task)

    # ------------------------------------------------------------ helpers

    def _eject(self, system: Any, *, strict: bool = False) -> None:
        try:
            drive = _cd_drive(system)
            # What a failed insertion left behind, not what was read before it.
            _sushy_call("read virtual media", drive.refresh)
            if drive.inserted or drive.image:
                _sushy_call("virtual media eject", drive.eject_media)
        except DriverError as error:
            if strict:
                raise
            LOG.warning("could not eject the virtual CD: %s", error)

    def unpublish(self, task: Any) -> None:
        """Withdraw the image published for the node."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(published_path(self.conf, task.node))

    def prepare_instance_image(self, task: Any) -> str:
        """The URL the BMC fetches the instance's ISO from (downloaded, verified, built as needed)."""
        info = task.node.get("instance_info") or {}
        verify_tls = webserver_verify(self.conf)
        cache = images.ImageCache.from_conf(self.conf)
        file_paths = self.conf.conductor.file_url_allowed_paths
        target = published_path(self.conf, task.node)
        if info.get("boot_iso"):
            if glance.is_glance_image(info["boot_iso"]):
                # As upstream: what the Image service says of the image goes into instance_info, and the
                # data is checked against it like any other image's.
                image = glance.usable_image(self.conf, info["boot_iso"], "boot_iso", task.node.get("owner"))
                info = {**info, **glance.instance_info_fields(image)}
                task.update(instance_info=info)
                checksum = images.expected_checksum(info, info["boot_iso"])
                images.publish(glance.fetch(self.conf, cache, image, checksum), target)
                return published_url(task)
            url = images.check_url(info["boot_iso"], "boot_iso", file_paths)
            if self.conf.deploy.ramdisk_image_download_source == "http" and url.startswith(("http:", "https:")):
                return url
            checksum = images.expected_checksum(info, url, verify_tls=verify_tls, file_paths=file_paths)
            images.publish(cache.fetch(url, checksum, verify_tls=verify_tls), target)
            return published_url(task)
        kernel = self._local_copy(task, "kernel", cache, verify_tls)
        ramdisk = self._local_copy(task, "ramdisk", cache, verify_tls)
        params = " ".join(p for p in (self.conf.redfish.kernel_append_params,
                                      str(info.get("ramdisk_kernel_arguments") or "")) if p.strip())
        os.makedirs(os.path.dirname(target), exist_ok=True)
        iso.build_iso(self.conf, kernel, ramdisk, params, boot_mode(task.node, self.conf), target)
        return published_url(task)

    def _local_copy(self, task: Any, field: str, cache: images.ImageCache, verify_tls: bool | str) -> str:
        """The cached copy of ``instance_info/<field>``: an Image service image (verified) or a URL."""
        ref = (task.node.get("instance_info") or {}).get(field)
        if glance.is_glance_image(ref):
            image = glance.usable_image(self.conf, ref, field, task.node.get("owner"))
            return glance.fetch(self.conf, cache, image)
        url = images.check_url(ref, field, self.conf.conductor.file_url_allowed_paths)
        return cache.fetch(url, None, verify_tls=verify_tls)


def _check_reference(info: Mapping[str, Any], field: str, file_paths: Sequence[str]) -> None:
    ref = info[field]
    if glance.is_glance_image(ref):
        glance.parse_image_id(ref, field)
    else:
        images.check_url(ref, field, file_paths)


def check_instance_info(node: Mapping[str, Any], file_paths: Sequence[str]) -> None:
    """The instance_info a ramdisk deployment needs (no network access)."""
    info = node.get("instance_info") or {}
    if info.get("boot_iso"):
        _check_reference(info, "boot_iso", file_paths)
        if glance.is_glance_image(info["boot_iso"]):
            return
        if bool(info.get("image_os_hash_algo")) != bool(info.get("image_os_hash_value")):
            raise InvalidParameterValue("instance_info needs both image_os_hash_algo and image_os_hash_value")
        return
    missing = [field for field in ("kernel", "ramdisk") if not info.get(field)]
    if missing:
        raise MissingParameterValue(
            f"Node {node['uuid']} needs instance_info/boot_iso, or instance_info/kernel and "
            f"instance_info/ramdisk, for a ramdisk deployment; missing: {', '.join(missing)}"
        )
    _check_reference(info, "kernel", file_paths)
    _check_reference(info, "ramdisk", file_paths)
    arguments = info.get("ramdisk_kernel_arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise InvalidParameterValue("instance_info/ramdisk_kernel_arguments must be a string")


def check_images(conf: Any, node: Mapping[str, Any]) -> None:
    """Images of the Image service the deployment names must exist, be active and be usable by the node's owner."""
    info = node.get("instance_info") or {}
    for field in ("boot_iso",) if info.get("boot_iso") else ("kernel", "ramdisk"):
        if glance.is_glance_image(info.get(field)):
            glance.usable_image(conf, info[field], field, node.get("owner"))


class RamdiskDeploy(BaseInterface):
    interface_type = "deploy"
    name = "ramdisk"

    def validate(self, task: Any) -> None:
        boot = task.driver.boot
        if "ramdisk_boot" not in getattr(boot, "capabilities", ()):
            raise InvalidParameterValue(
                f"The {boot.name} boot interface cannot boot a ramdisk: use redfish-virtual-media"
            )
        boot.validate(task)
        check_instance_info(task.node, self.conf.conductor.file_url_allowed_paths)
        check_images(self.conf, task.node)

    @deploy_step(priority=100)
    def deploy(self, task: Any) -> None:
        power = task.driver.power
        boot = task.driver.boot
        # Download, verify or build the image before touching the machine: a bad image leaves it as it was.
        iso_url = boot.prepare_instance_image(task)
        try:
            self._power(task, states.POWER_OFF)
        except Exception:
            boot.unpublish(task)
            raise
        boot.prepare_instance(task, iso_url)
        try:
            power.set_power_state(task, states.POWER_ON)
        except Exception:
            with contextlib.suppress(Exception):
                task.driver.boot.clean_up_instance(task)
            raise
        task.update(power_state=states.POWER_ON)

    def tear_down(self, task: Any) -> None:
        self._power(task, states.POWER_OFF)
        task.driver.boot.clean_up_instance(task)

    def _power(self, task: Any, target: str) -> None:
        power = task.driver.power
        if power.get_power_state(task) != target:
            power.set_power_state(task, target)
        task.update(power_state=target)
