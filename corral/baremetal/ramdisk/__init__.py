"""Corral's agent ramdisk: ironic-python-agent on a minimal Debian, built from Debian and PyPI packages only.

``build()`` makes three files in the output directory:

* ``ipa.kernel``: the Debian kernel (``linux-image-amd64`` of the suite);
* ``ipa.initramfs``: a zstd-compressed cpio of a Debian root file system
  (debootstrap's minimal base, the tools the agent runs, ironic-python-agent
  from PyPI in a virtualenv, a subset of the kernel's modules) whose
  ``/init`` is a shell script: no systemd;
* ``ipa.iso``: the two as an ISO image booting under BIOS and UEFI (GRUB).

The kernel and ramdisk are what ``driver_info/deploy_kernel`` and
``deploy_ramdisk`` (or ``[conductor] deploy_kernel`` / ``deploy_ramdisk``)
name; the conductor makes them into an ISO for each node with the kernel
arguments the agent needs.  The ISO is for ``driver_info/deploy_iso``,
booted as it is: ``kernel_args`` must then carry ``ipa-api-url=...``.

The work is done by ``files/build.sh`` (as root).  A hash of every input
(the scripts and lists in ``files/``, the options, the SSH keys) is kept
next to the output as ``inputs.sha256``: a build whose inputs did not
change is skipped, so the build can run before every test run.  Downloaded
packages are kept under ``<output>/.work/cache`` for the next build.

This module uses the standard library only: ``python -m
corral.baremetal.ramdisk`` runs before Corral's dependencies are installed
(``tools/baremetal-lab``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILES = Path(__file__).resolve().parent / "files"
DEFAULT_IPA_VERSION = "13.0.0"
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
KERNEL, INITRAMFS, ISO = "ipa.kernel", "ipa.initramfs", "ipa.iso"
OUTPUTS = (KERNEL, INITRAMFS, ISO)
HASH_FILE = "inputs.sha256"
INPUTS_FILE = "inputs.json"
# Kernel arguments of the ISO's boot entry, before the caller's.
ISO_KERNEL_ARGS = "nofb vga=normal"
# Host tools the build runs, and the Debian packages that have them.
HOST_TOOLS = {
    "debootstrap": "debootstrap", "chroot": "coreutils", "cpio": "cpio", "zstd": "zstd", "dpkg-deb": "dpkg",
    "grub-mkrescue": "grub-common grub-pc-bin grub-efi-amd64-bin",
    "xorriso": "xorriso", "mformat": "mtools",
}


class RamdiskBuildError(Exception):
    """The ramdisk cannot be built; the message says why."""


@dataclass(frozen=True)
class Options:
    output: str
    ipa_version: str = DEFAULT_IPA_VERSION
    suite: str = DEFAULT_SUITE
    mirror: str = DEFAULT_MIRROR
    packages: tuple[str, ...] = ()
    # authorized_keys for root: the ramdisk then runs an SSH server
    ssh_keys: str = ""
    # kernel arguments of the ISO's boot entry (the kernel and ramdisk get theirs from the conductor)
    kernel_args: str = ""


@dataclass
class Result:
    built: bool
    paths: dict[str, str]
    seconds: float
    inputs_hash: str
    log: list[str] = field(default_factory=list)


def _files_digest() -> dict[str, str]:
    """sha256 of every file the build reads from the package, by name."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(FILES.iterdir()) if path.is_file()}


def inputs(options: Options) -> dict[str, Any]:
    """Everything the ramdisk is made from (the SSH keys by their hash)."""
    return {
        "ipa_version": options.ipa_version,
        "suite": options.suite,
        "mirror": options.mirror,
        "packages": sorted(set(options.packages)),
        "ssh_keys_sha256": hashlib.sha256(options.ssh_keys.encode()).hexdigest() if options.ssh_keys else None,
        "kernel_args": options.kernel_args,
        "files": _files_digest(),
    }


def inputs_hash(options: Options) -> str:
    return hashlib.sha256(json.dumps(inputs(options), sort_keys=True).encode()).hexdigest()


def paths(output: str) -> dict[str, str]:
    return {name: os.path.join(output, name) for name in OUTPUTS}


def up_to_date(options: Options) -> bool:
    """Whether the output was built from these very inputs and is complete."""
    try:
        recorded = Path(options.output, HASH_FILE).read_text().split()[0]
    except (OSError, IndexError):
        return False
    if recorded != inputs_hash(options):
        return False
    return all(os.path.isfile(path) and os.path.getsize(path) > 0 for path in paths(options.output).values())


def check_options(options: Options) -> None:
    for package in options.packages:
        if not package or not all(c.isalnum() or c in "+-.:=~" for c in package) or package.startswith("-"):
            raise RamdiskBuildError(f"Invalid Debian package name {package!r}")
    if any(c in options.kernel_args for c in "\n\r"):
        raise RamdiskBuildError("The kernel arguments must be on one line")
    for name, value in (("IPA version", options.ipa_version), ("suite", options.suite)):
        if not value or not all(c.isalnum() or c in "-._" for c in value):
            raise RamdiskBuildError(f"Invalid {name} {value!r}")
    if not options.mirror.startswith(("http://", "https://")) or any(c.isspace() for c in options.mirror):
        raise RamdiskBuildError(f"Invalid Debian mirror {options.mirror!r}: an http(s) URL is needed")


def missing_host_tools() -> list[str]:
    """The host tools the build needs and cannot find, with their Debian packages."""
    return [f"{tool} (Debian: {package})" for tool, package in HOST_TOOLS.items() if shutil.which(tool) is None]


Runner = Callable[..., "subprocess.CompletedProcess[Any]"]


def build(options: Options, *, force: bool = False, runner: Runner = subprocess.run,
          log: Callable[[str], None] = print) -> Result:
    """Build the ramdisk into ``options.output`` unless it is up to date (``force``: build anyway).

    ``runner`` runs the build script (``subprocess.run``'s signature).
    """
    check_options(options)
    started = time.monotonic()
    os.makedirs(options.output, exist_ok=True)
    digest = inputs_hash(options)
    with _locked(os.path.join(options.output, ".lock")):
        if not force and up_to_date(options):
            log(f"ramdisk in {options.output} is up to date (inputs {digest[:12]})")
            return Result(False, paths(options.output), time.monotonic() - started, digest)
        if runner is subprocess.run:
            if os.geteuid() != 0:
                raise RamdiskBuildError("Building the ramdisk needs root (debootstrap, chroot, mounts)")
            missing = missing_host_tools()
            if missing:
                raise RamdiskBuildError(f"Missing tools to build the ramdisk: {', '.join(missing)}")
        # The previous output stays valid (and its hash with it) until the new one is complete.
        work = os.path.join(options.output, ".work")
        staging = os.path.join(work, "out")
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        with tempfile.NamedTemporaryFile("w", dir=work, prefix="keys-", delete=False) as keys:
            keys.write(options.ssh_keys)
        try:
            environment = {
                **os.environ, "WORK": work, "OUT": staging, "FILES": str(FILES), "SUITE": options.suite,
                "MIRROR": options.mirror, "IPA_VERSION": options.ipa_version,
                "PACKAGES": " ".join(sorted(set(options.packages))),
                "SSH_KEYS": keys.name if options.ssh_keys else "",
            }
            completed = runner(["bash", str(FILES / "build.sh")], env=environment, check=False)
            if completed.returncode != 0:
                raise RamdiskBuildError(f"The ramdisk build failed (status {completed.returncode}); logs are in "
                                        f"{os.path.join(work, 'logs')}")
        finally:
            os.unlink(keys.name)
        for name in (KERNEL, INITRAMFS):
            if not os.path.isfile(os.path.join(staging, name)):
                raise RamdiskBuildError(f"The ramdisk build did not make {name}")
        make_iso(os.path.join(staging, KERNEL), os.path.join(staging, INITRAMFS),
                 " ".join(a for a in (ISO_KERNEL_ARGS, options.kernel_args) if a), os.path.join(staging, ISO))
        # Half-replaced output must not look up to date.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(options.output, HASH_FILE))
        for name in os.listdir(staging):
            os.replace(os.path.join(staging, name), os.path.join(options.output, name))
        recorded = {**inputs(options), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        Path(options.output, INPUTS_FILE).write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        Path(options.output, HASH_FILE).write_text(f"{digest}\n")
        seconds = time.monotonic() - started
        log(f"ramdisk built in {seconds:.0f} s: {', '.join(paths(options.output).values())}")
        return Result(True, paths(options.output), seconds, digest)


def make_iso(kernel: str, initramfs: str, kernel_args: str, output: str) -> None:
    """An ISO image booting ``kernel`` and ``initramfs`` under BIOS and UEFI (grub-mkrescue)."""
    from corral.baremetal.drivers import iso

    try:
        iso.build_iso(None, kernel, initramfs, kernel_args, "uefi", output)
    except iso.ImageBuildFailed as error:
        raise RamdiskBuildError(f"Cannot make the ISO image: {error}") from None


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """One build at a time per output directory."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def options_from(output: str, ipa_version: str | None, suite: str | None, mirror: str | None,
                 packages: Sequence[str], ssh_key_files: Sequence[str], kernel_args: str | None) -> Options:
    """Options from the command line's values (SSH keys read from their files)."""
    keys = []
    for path in ssh_key_files:
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise RamdiskBuildError(f"Cannot read SSH key file {path}: {error.strerror}") from None
        keys.extend(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return Options(
        output=os.path.abspath(output), ipa_version=ipa_version or DEFAULT_IPA_VERSION,
        suite=suite or DEFAULT_SUITE, mirror=mirror or DEFAULT_MIRROR, packages=tuple(packages),
        ssh_keys="".join(f"{key}\n" for key in keys), kernel_args=kernel_args or "",
    )
