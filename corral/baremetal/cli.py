"""``corral baremetal ...``: Bare Metal's commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from corral.baremetal import ramdisk

DEFAULT_RAMDISK_DIR = "/var/lib/corral/ramdisk"


@click.group(name="baremetal")
def cli() -> None:
    """Bare Metal commands."""


@cli.command("build-ramdisk")
@click.option("--output", default=DEFAULT_RAMDISK_DIR, show_default=True, type=click.Path(file_okay=False),
              help="Directory of ipa.kernel, ipa.initramfs and ipa.iso (and the package caches, under .work).")
@click.option("--add-package", "packages", multiple=True, metavar="PACKAGE",
              help="Another Debian package in the ramdisk, e.g. for debugging (repeatable).")
@click.option("--ssh-key", "ssh_keys", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="A file of SSH public keys that may log in as root; the ramdisk then runs an SSH server "
              "(repeatable).")
@click.option("--ipa-version", default=ramdisk.DEFAULT_IPA_VERSION, show_default=True,
              help="ironic-python-agent version from PyPI.")
@click.option("--suite", default=ramdisk.DEFAULT_SUITE, show_default=True, help="Debian release.")
@click.option("--mirror", default=ramdisk.DEFAULT_MIRROR, show_default=True, help="Debian mirror.")
@click.option("--kernel-args", default="", help="Kernel arguments of the ISO's boot entry (ipa-api-url=... for "
              "an ISO used as driver_info/deploy_iso).")
@click.option("--force", is_flag=True, help="Build even when nothing the ramdisk is made from changed.")
def build_ramdisk(output: str, packages: Sequence[str], ssh_keys: Sequence[str], ipa_version: str, suite: str,
                  mirror: str, kernel_args: str, force: bool) -> None:
    """Build the agent ramdisk (ironic-python-agent on Debian) for the direct deploy and cleaning.

    Needs root, debootstrap, cpio, zstd, grub-mkrescue (grub-pc-bin,
    grub-efi-amd64-bin), xorriso and mtools, and access to a Debian mirror
    and PyPI.  Nothing is built when the output was made from the same
    inputs (inputs.sha256 next to it).
    """
    try:
        options = ramdisk.options_from(output, ipa_version, suite, mirror, packages, ssh_keys, kernel_args)
        result = ramdisk.build(options, force=force, log=click.echo)
    except ramdisk.RamdiskBuildError as error:
        raise click.ClickException(str(error)) from None
    paths = result.paths
    click.echo("For the conductor (corral.conf):\n"
               f"  [conductor]\n  deploy_kernel = file://{paths[ramdisk.KERNEL]}\n"
               f"  deploy_ramdisk = file://{paths[ramdisk.INITRAMFS]}\n"
               f"  file_url_allowed_paths = {options.output}\n"
               "  [deploy]\n  external_callback_url = http://<this host, as the machines reach it>:<port>/baremetal",
               file=sys.stdout)
