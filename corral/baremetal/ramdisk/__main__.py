"""``python -m corral.baremetal.ramdisk``: build the agent ramdisk (what ``corral baremetal build-ramdisk`` does).

For hosts where Corral's dependencies are not installed yet: this uses the
standard library only.
"""

from __future__ import annotations

import argparse
import sys

from corral.baremetal import ramdisk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corral.baremetal.ramdisk", description=__doc__)
    parser.add_argument("--output", required=True, help="directory of ipa.kernel, ipa.initramfs and ipa.iso")
    parser.add_argument("--add-package", action="append", default=[], metavar="PACKAGE",
                        help="another Debian package in the ramdisk (repeatable)")
    parser.add_argument("--ssh-key", action="append", default=[], metavar="FILE",
                        help="a file of SSH public keys allowed to log in as root (repeatable)")
    parser.add_argument("--ipa-version", default=ramdisk.DEFAULT_IPA_VERSION)
    parser.add_argument("--suite", default=ramdisk.DEFAULT_SUITE)
    parser.add_argument("--mirror", default=ramdisk.DEFAULT_MIRROR)
    parser.add_argument("--kernel-args", default="", help="kernel arguments of the ISO's boot entry")
    parser.add_argument("--force", action="store_true", help="build even when the inputs did not change")
    args = parser.parse_args(argv)
    try:
        options = ramdisk.options_from(args.output, args.ipa_version, args.suite, args.mirror, args.add_package,
                                       args.ssh_key, args.kernel_args)
        ramdisk.build(options, force=args.force)
    except ramdisk.RamdiskBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
