"""A test "machine" for the real ironic-python-agent: one file as its only disk.

``TestMachineHardwareManager`` is an IPA hardware manager (entry point
``ironic_python_agent.hardware_managers``, registered by
``agent_support.install_entry_point``) that presents the machine the tests pretend
to boot: one network interface with the node's port MAC, one disk that
is a plain file, and the erase clean steps working on that file.

``python -m tests.baremetal.agent_machine <ipa options>`` starts the real
agent (``ironic_python_agent.cmd.agent.run``) with only this manager
loaded: IPA's generic manager probes and changes the host it runs on
(RAID assembly, kernel modules, disks), which a test machine must not
let it do.  The agent's lookup, heartbeats, command API, clean and
standby extensions are IPA's own code, unchanged.

The machine is described by environment variables: CORRAL_TEST_MACHINE_MAC,
CORRAL_TEST_MACHINE_DISK (its disk device), CORRAL_TEST_MACHINE_DIR (where
its TLS certificate goes), CORRAL_TEST_MACHINE_BOOT_MODE (uefi or bios).
"""

from __future__ import annotations

import os
import sys
from typing import Any

# The agent command module first: importing it registers IPA's options the hardware module reads.
from ironic_python_agent.cmd import agent as agent_command  # isort: skip
from ironic_python_agent import hardware  # isort: skip

ENTRY_POINT_NAME = "corral_test_machine"
ERASED_METADATA_BYTES = 1024 * 1024


def _disk() -> str:
    return os.environ["CORRAL_TEST_MACHINE_DISK"]


def _size(path: str) -> int:
    # A block device's size is where seeking to its end lands (its stat size is 0).
    with open(path, "rb") as disk:
        return disk.seek(0, os.SEEK_END)


def _zero(path: str, offset: int, length: int) -> None:
    with open(path, "r+b") as disk:
        disk.seek(offset)
        disk.write(b"\0" * length)
        disk.flush()
        os.fsync(disk.fileno())


class TestMachineHardwareManager(hardware.HardwareManager):
    HARDWARE_MANAGER_NAME = "CorralTestMachine"
    HARDWARE_MANAGER_VERSION = "1.0"

    def evaluate_hardware_support(self) -> int:
        return hardware.HardwareSupport.SERVICE_PROVIDER

    def list_network_interfaces(self) -> list[Any]:
        return [hardware.NetworkInterface("test0", os.environ["CORRAL_TEST_MACHINE_MAC"],
                                          ipv4_address="127.0.0.1", has_carrier=True)]

    def get_cpus(self) -> Any:
        return hardware.CPU("Corral test CPU", "2000", 1, "x86_64")

    def get_memory(self) -> Any:
        return hardware.Memory(total=1024 ** 3, physical_mb=1024)

    def list_block_devices(self, include_partitions: bool = False, all_serial_and_wwn: bool = False) -> list[Any]:
        return [hardware.BlockDevice(_disk(), "Corral test disk", _size(_disk()), False,
                                     serial="corral-test", vendor="corral")]

    def get_os_install_device(self, permit_refresh: bool = False) -> str:
        return _disk()

    def get_bmc_address(self) -> str:
        return "0.0.0.0"

    def get_bmc_v6address(self) -> str:
        return "::/0"

    def get_bmc_mac(self) -> None:
        return None

    def get_system_vendor_info(self) -> Any:
        return hardware.SystemVendorInfo(product_name="Corral test machine", serial_number="corral-test",
                                         manufacturer="corral", firmware=hardware.SystemFirmware(
                                             vendor="corral", version="1", build_date="2026-01-01"))

    def generate_tls_certificate(self, ip_address: str) -> Any:
        """IPA's self-signed certificate for automatic TLS, kept in this machine's directory."""
        from ironic_python_agent import tls_utils

        root = os.environ["CORRAL_TEST_MACHINE_DIR"]
        cert_path, key_path = os.path.join(root, "agent.crt"), os.path.join(root, "agent.key")
        content = tls_utils._generate_tls_certificate(cert_path, key_path, "corral-test-machine",  # noqa: SLF001
                                                      ip_address)
        return tls_utils.TlsCertificate(content, cert_path, key_path)

    def get_boot_info(self) -> Any:
        # The firmware the machine booted the ramdisk with (CORRAL_TEST_MACHINE_BOOT_MODE, uefi by default).
        return hardware.BootInfo(current_boot_mode=os.environ.get("CORRAL_TEST_MACHINE_BOOT_MODE", "uefi"))

    def list_hardware_info(self) -> dict[str, Any]:
        return {
            "interfaces": self.list_network_interfaces(),
            "cpu": self.get_cpus(),
            "disks": self.list_block_devices(),
            "memory": self.get_memory(),
            "bmc_address": self.get_bmc_address(),
            "bmc_v6address": self.get_bmc_v6address(),
            "system_vendor": self.get_system_vendor_info(),
            "boot": self.get_boot_info(),
            "hostname": "corral-test-machine",
        }

    def get_clean_steps(self, node: dict[str, Any], ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy", "reboot_requested": False,
             "abortable": True},
            {"step": "erase_devices", "priority": 10, "interface": "deploy", "reboot_requested": False,
             "abortable": True},
        ]

    def get_deploy_steps(self, node: dict[str, Any], ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    def full_sync(self) -> None:
        with open(_disk(), "rb+") as disk:
            os.fsync(disk.fileno())

    def erase_devices_metadata(self, node: dict[str, Any], ports: list[dict[str, Any]]) -> None:
        """Zero the first and last megabyte of the disk, where partition tables live."""
        size = _size(_disk())
        length = min(ERASED_METADATA_BYTES, size)
        _zero(_disk(), 0, length)
        _zero(_disk(), size - length, length)

    def erase_devices(self, node: dict[str, Any], ports: list[dict[str, Any]]) -> dict[str, bool]:
        _zero(_disk(), 0, _size(_disk()))
        return {_disk(): True}


def _only_this_machine() -> Any:
    import stevedore

    return stevedore.NamedExtensionManager(
        namespace="ironic_python_agent.hardware_managers", names=[ENTRY_POINT_NAME], invoke_on_load=True,
        name_order=True,
    )


def main() -> None:
    hardware._get_extensions = _only_this_machine  # noqa: SLF001 - keep IPA's generic manager off the host
    sys.argv[0] = "ironic-python-agent"
    agent_command.run()


if __name__ == "__main__":
    main()
