"""The agent ramdisk's build: what decides a rebuild, what it leaves behind, how it is shipped and called.

The build itself (debootstrap, PyPI, the kernel) runs in
``tools/baremetal-lab`` and is proven by the lab's deployment
(test_direct_lab.py); here its script is replaced by a stand-in that
writes what the real one writes.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from corral.baremetal import ramdisk
from corral.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeBuild:
    """Stands in for files/build.sh: records each run and writes the kernel and initramfs into OUT."""

    def __init__(self, returncode: int = 0) -> None:
        self.runs: list[dict[str, str]] = []
        self.returncode = returncode

    def __call__(self, command: list[str], env: dict[str, str], check: bool) -> subprocess.CompletedProcess[Any]:
        assert command == ["bash", str(ramdisk.FILES / "build.sh")] and check is False
        keys = Path(env["SSH_KEYS"]).read_text() if env["SSH_KEYS"] else ""
        self.runs.append({**{k: env[k] for k in ("WORK", "OUT", "SUITE", "MIRROR", "IPA_VERSION", "PACKAGES")},
                          "keys": keys})
        if self.returncode == 0:
            Path(env["OUT"], ramdisk.KERNEL).write_bytes(b"kernel %d" % len(self.runs))
            Path(env["OUT"], ramdisk.INITRAMFS).write_bytes(b"initramfs %d" % len(self.runs))
        return subprocess.CompletedProcess(command, self.returncode)


@pytest.fixture
def fake_iso(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The ISO step, recording its kernel arguments instead of running grub-mkrescue."""
    made: list[tuple[str, str]] = []

    def make_iso(kernel: str, initramfs: str, kernel_args: str, output: str) -> None:
        made.append((kernel_args, output))
        Path(output).write_bytes(Path(kernel).read_bytes() + Path(initramfs).read_bytes())

    monkeypatch.setattr(ramdisk, "make_iso", make_iso)
    return made


def options(tmp_path: Path, **values: Any) -> ramdisk.Options:
    return ramdisk.Options(output=str(tmp_path / "out"), **values)


def test_the_inputs_hash_follows_every_input_and_nothing_else(tmp_path: Path) -> None:
    base = ramdisk.inputs_hash(options(tmp_path))
    assert ramdisk.inputs_hash(options(tmp_path)) == base
    # Where it goes does not change what it is.
    assert ramdisk.inputs_hash(ramdisk.Options(output=str(tmp_path / "elsewhere"))) == base
    # The order and repetition of extra packages do not matter either.
    assert (ramdisk.inputs_hash(options(tmp_path, packages=("vim", "strace")))
            == ramdisk.inputs_hash(options(tmp_path, packages=("strace", "vim", "vim"))))
    changed = {
        ramdisk.inputs_hash(options(tmp_path, packages=("strace",))),
        ramdisk.inputs_hash(options(tmp_path, ssh_keys="ssh-ed25519 AAAA one\n")),
        ramdisk.inputs_hash(options(tmp_path, ssh_keys="ssh-ed25519 AAAA two\n")),
        ramdisk.inputs_hash(options(tmp_path, ipa_version="12.0.0")),
        ramdisk.inputs_hash(options(tmp_path, suite="trixie")),
        ramdisk.inputs_hash(options(tmp_path, mirror="http://mirror.example.com/debian")),
        ramdisk.inputs_hash(options(tmp_path, kernel_args="ipa-api-url=http://192.0.2.1:6385/baremetal")),
    }
    assert len(changed) == 7 and base not in changed
    # The shipped files count with their contents: each one of them is in the hash.
    assert set(ramdisk.inputs(options(tmp_path))["files"]) == {
        "build.sh", "init", "dhcp-script", "ironic-python-agent.conf", "modules.txt", "packages.txt"}


def test_a_build_is_skipped_while_its_inputs_are_unchanged(tmp_path: Path, fake_iso: list[tuple[str, str]]) -> None:
    build = FakeBuild()
    wanted = options(tmp_path, packages=("strace",), kernel_args="ipa-debug=1")
    first = ramdisk.build(wanted, runner=build, log=lambda _: None)
    assert first.built and len(build.runs) == 1
    assert build.runs[0]["PACKAGES"] == "strace" and build.runs[0]["IPA_VERSION"] == ramdisk.DEFAULT_IPA_VERSION
    assert fake_iso == [(f"{ramdisk.ISO_KERNEL_ARGS} ipa-debug=1", os.path.join(tmp_path, "out", ".work", "out",
                                                                                  "ipa.iso"))]
    out = tmp_path / "out"
    assert (out / "ipa.kernel").read_bytes() == b"kernel 1"
    assert (out / "ipa.iso").read_bytes() == b"kernel 1initramfs 1"
    assert (out / "inputs.sha256").read_text().strip() == first.inputs_hash == ramdisk.inputs_hash(wanted)
    recorded = json.loads((out / "inputs.json").read_text())
    assert recorded["packages"] == ["strace"] and recorded["kernel_args"] == "ipa-debug=1"
    assert ramdisk.up_to_date(wanted)

    again = ramdisk.build(wanted, runner=build, log=lambda _: None)
    assert not again.built and len(build.runs) == 1 and again.paths == first.paths
    # Forced, or with another input, or with an output missing: built again.
    assert ramdisk.build(wanted, force=True, runner=build, log=lambda _: None).built
    assert (out / "ipa.kernel").read_bytes() == b"kernel 2"
    other = options(tmp_path, packages=("strace", "tcpdump"), kernel_args="ipa-debug=1")
    assert not ramdisk.up_to_date(other)
    assert ramdisk.build(other, runner=build, log=lambda _: None).built
    assert build.runs[-1]["PACKAGES"] == "strace tcpdump"
    (out / "ipa.initramfs").unlink()
    assert not ramdisk.up_to_date(other)
    assert ramdisk.build(other, runner=build, log=lambda _: None).built
    assert len(build.runs) == 4


def test_a_failed_build_keeps_the_previous_ramdisk(tmp_path: Path, fake_iso: list[tuple[str, str]]) -> None:
    first = options(tmp_path)
    ramdisk.build(first, runner=FakeBuild(), log=lambda _: None)
    with pytest.raises(ramdisk.RamdiskBuildError, match=r"The ramdisk build failed \(status 3\); logs are in "):
        ramdisk.build(options(tmp_path, packages=("no-such-package",)), runner=FakeBuild(returncode=3),
                      log=lambda _: None)
    # The previous build and its hash are untouched: still up to date for its own inputs.
    assert ramdisk.up_to_date(first)
    assert (tmp_path / "out" / "ipa.kernel").read_bytes() == b"kernel 1"


def test_ssh_keys_come_from_files_and_are_recorded_by_hash_only(tmp_path: Path,
                                                                fake_iso: list[tuple[str, str]]) -> None:
    keys = tmp_path / "id.pub"
    keys.write_text("# mine\nssh-ed25519 AAAAC3Nz first@example\n\nssh-rsa AAAAB3Nz second@example\n")
    wanted = ramdisk.options_from(str(tmp_path / "out"), None, None, None, ["strace"], [str(keys)], None)
    assert wanted.ssh_keys == "ssh-ed25519 AAAAC3Nz first@example\nssh-rsa AAAAB3Nz second@example\n"
    build = FakeBuild()
    ramdisk.build(wanted, runner=build, log=lambda _: None)
    assert build.runs[0]["keys"] == wanted.ssh_keys
    recorded = (tmp_path / "out" / "inputs.json").read_text()
    assert "AAAAC3Nz" not in recorded and json.loads(recorded)["ssh_keys_sha256"]
    # The key file handed to the script is gone afterwards.
    assert not [name for name in os.listdir(tmp_path / "out" / ".work") if name.startswith("keys-")]
    with pytest.raises(ramdisk.RamdiskBuildError, match="Cannot read SSH key file"):
        ramdisk.options_from(str(tmp_path), None, None, None, [], [str(tmp_path / "missing.pub")], None)


@pytest.mark.parametrize(("values", "message"), [
    ({"packages": ("vim; rm -rf /",)}, "Invalid Debian package name"),
    ({"packages": ("-oFoo=bar",)}, "Invalid Debian package name"),
    ({"kernel_args": "a\nb"}, "must be on one line"),
    ({"ipa_version": "13.0.0 && true"}, "Invalid IPA version"),
    ({"mirror": "ftp://mirror.example.com/debian"}, "Invalid Debian mirror"),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    build = FakeBuild()
    with pytest.raises(ramdisk.RamdiskBuildError, match=message):
        ramdisk.build(options(tmp_path, **values), runner=build, log=lambda _: None)
    assert build.runs == []


def test_the_build_files_ship_as_package_data() -> None:
    """Every file the build reads is matched by the package data of pyproject.toml."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        package_data = tomllib.load(handle)["tool"]["setuptools"]["package-data"]
    patterns = package_data["corral.baremetal.ramdisk"]
    shipped = sorted(path.name for path in ramdisk.FILES.iterdir())
    assert shipped == ["build.sh", "dhcp-script", "init", "ironic-python-agent.conf", "modules.txt",
                       "packages.txt"]
    for name in shipped:
        assert any(fnmatch.fnmatch(f"files/{name}", pattern) for pattern in patterns), name
    # The script is run with bash and the init is installed with its mode: neither needs an executable bit.
    assert (ramdisk.FILES / "build.sh").read_text().startswith("#!/bin/bash\n")
    assert (ramdisk.FILES / "init").read_text().startswith("#!/bin/sh\n")


def test_the_command_passes_its_options_and_prints_the_conductor_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[tuple[ramdisk.Options, bool]] = []

    def build(wanted: ramdisk.Options, *, force: bool = False, **_: Any) -> ramdisk.Result:
        called.append((wanted, force))
        return ramdisk.Result(True, ramdisk.paths(wanted.output), 1.0, "0" * 64)

    monkeypatch.setattr(ramdisk, "build", build)
    keys = tmp_path / "key.pub"
    keys.write_text("ssh-ed25519 AAAA admin@example\n")
    result = CliRunner().invoke(main, ["baremetal", "build-ramdisk", "--output", str(tmp_path / "rd"),
                                       "--add-package", "strace", "--add-package", "tcpdump", "--ssh-key", str(keys),
                                       "--kernel-args", "ipa-debug=1", "--force"])
    assert result.exit_code == 0, result.output
    wanted, force = called[0]
    assert force is True
    assert (wanted.output, wanted.packages, wanted.ssh_keys, wanted.kernel_args) == (
        str(tmp_path / "rd"), ("strace", "tcpdump"), "ssh-ed25519 AAAA admin@example\n", "ipa-debug=1")
    assert f"deploy_kernel = file://{tmp_path / 'rd' / 'ipa.kernel'}" in result.output
    assert f"file_url_allowed_paths = {tmp_path / 'rd'}" in result.output

    monkeypatch.setattr(ramdisk, "build", lambda *a, **k: (_ for _ in ()).throw(
        ramdisk.RamdiskBuildError("Building the ramdisk needs root")))
    failed = CliRunner().invoke(main, ["baremetal", "build-ramdisk", "--output", str(tmp_path / "rd")])
    assert failed.exit_code == 1 and "Building the ramdisk needs root" in failed.output
