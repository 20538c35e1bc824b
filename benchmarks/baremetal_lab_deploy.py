"""Deploys of the bare metal lab's QEMU machines, Corral beside upstream Ironic 39.

N machines of the lab (``tools/baremetal-lab``: libvirt, QEMU's TCG
emulator, behind sushy-tools' Redfish emulator) are deployed at once,
first by one server, then by the other, on the same machines: ``redfish``
nodes with ``redfish-virtual-media`` boot and the ``direct`` deploy, the
lab's agent ramdisk (ironic-python-agent from PyPI) as
``deploy_kernel``/``deploy_ramdisk``, a 64 MiB raw whole-disk image over
http with its sha256 and a config drive given as JSON (API 1.56), which
each server builds itself.

* Corral: ``corral serve`` (all services in one process tree) on its
  embedded SQLite databases.
* Upstream: Ironic 39's all-in-one ``ironic`` process
  (``tools/upstream-ironic``'s venv, ``rpc_transport = none``) on SQLite.

Both run with the same settings where they have the same options: no
authentication (``noauth``), no automated cleaning, no fast track,
``[api] ramdisk_heartbeat_timeout`` 30 s, ``[agent]`` and power-state
defaults, BIOS boot mode.  Neither serves its ``http_root`` itself: the
same ``python -m http.server`` child process does for both (the BMC
fetches the virtual media ISO there), and its CPU time is shown apart.

Measured per run: the wall time from the deploy requests (sent one after
the other) to each node's ``active`` and to the last one, and the CPU time
(user + system, with reaped children such as ``xorriso``/``mkisofs``) the
server's process tree used over that span, divided by the machines.  The
server's CPU over 10 idle seconds before the deploy is shown beside it
(periodic tasks).  The benchmark's own polling (one node list a second)
is counted against each server alike.  Sides alternate (round 1 Corral
first, round 2 upstream first, ...).

Networking: the guests reach the host only as 10.0.2.2 (QEMU's user
network), and the host never sends anything there (a blackhole route
for 10.0.2.0/24 while the benchmark runs).  The agent's API URL and
``[deploy] http_url`` use 10.0.2.2; the BMC's ISO URL
(``external_http_url``) and everything else the host uses 127.0.0.1.
Upstream Ironic's conductor sends a ``HEAD`` to the image URL the agent
is given, so that URL must work from both sides: the image is served on
``IMAGE_ADDRESS``, an address added to the host's loopback interface for
the run (the guests' traffic to it goes through QEMU's user network
to the host's loopback).  Both servers get that same URL.

Needs root (libvirt, routes, the loopback address), the lab
(``tools/baremetal-lab setup``) and upstream Ironic
(``tools/upstream-ironic setup``).  A benchmark, not a test.  Usage::

    python benchmarks/baremetal_lab_deploy.py [--nodes 2] [--rounds 2] [--sides corral,upstream]
                                              [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import ServerProcess, free_port, tree_cpu_seconds, write_config  # noqa: E402

from tests.baremetal import disk_image  # noqa: E402
from tests.baremetal.lab_support import Machines, MachineSpec, guest_network_blackholed  # noqa: E402
from tests.baremetal.vmedia_support import Emulator  # noqa: E402

LAB_DIR = Path(os.environ.get("CORRAL_LAB_DIR", "/var/tmp/corral-baremetal-lab"))
UPSTREAM_DIR = Path(os.environ.get("CORRAL_UPSTREAM_IRONIC_DIR", "/var/tmp/corral-upstream/ironic-39"))
# In the benchmarking range 198.18.0.0/15 (RFC 2544), outside the multi-host lab's 198.18.0.0/24:
# on the loopback interface it reaches nothing beyond this host.
IMAGE_ADDRESS = "198.19.255.10"
GUEST_HOST = "10.0.2.2"  # the host's loopback as the guests see it
API_VERSION = "1.82"
GIB = 1024 ** 3
DEPLOY_TIMEOUT = 900
IDLE_SECONDS = 10
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqTn6Uc9rUwmWzTQhq7lMjGqW1fQkJ0m3N7rX0c0rPl bench"


def read_env(path: Path) -> dict[str, str]:
    if not path.exists():
        raise SystemExit(f"{path} is missing: run the setup that writes it first")
    return dict(line.strip().split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@contextlib.contextmanager
def loopback_address(address: str) -> Iterator[None]:
    """``address`` on the loopback interface while the benchmark runs."""
    shown = subprocess.run(["ip", "-4", "addr", "show", "dev", "lo"], capture_output=True, text=True,
                           check=True).stdout
    added = False
    if f"{address}/" not in shown:
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
        added = True
    try:
        yield
    finally:
        if added:
            subprocess.run(["ip", "addr", "del", f"{address}/32", "dev", "lo"], check=False)


class FileServer:
    """``python -m http.server`` for a directory, in a child process (its CPU counted apart)."""

    def __init__(self, directory: Path, address: str, log: Path) -> None:
        self.port = _free_port_on(address)
        self.process = ServerProcess(
            "http.server", [sys.executable, "-m", "http.server", "--bind", address, "--directory", str(directory),
                            str(self.port)], f"http://{address}:{self.port}", log)
        self.process.wait_ready("/")

    def stop(self) -> None:
        self.process.stop()


def _free_port_on(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class Api:
    """The Bare Metal API of one side, as a standalone operator calls it."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy, whatever the environment says
        self.session.headers.update({"X-OpenStack-Ironic-API-Version": API_VERSION, "X-Auth-Token": "admin"})

    def call(self, method: str, path: str, expect: int, **kwargs: Any) -> Any:
        response = self.session.request(method, self.url + path, timeout=60, **kwargs)
        if response.status_code != expect:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    def nodes(self) -> dict[str, dict[str, Any]]:
        fields = "uuid,name,provision_state,target_provision_state,reservation,last_error,power_state," \
                 "driver_internal_info"
        listed = self.call("GET", f"/v1/nodes?fields={fields}", 200)["nodes"]
        return {node["name"]: node for node in listed}

    def wait(self, names: list[str], state: str, timeout: float, log: Any = None) -> dict[str, float]:
        """Until every node is ``state`` and unlocked; when each got there (monotonic).

        ``log(name, node, now)`` sees each node not there yet at every poll (one node list a second).
        """
        reached: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        while len(reached) < len(names):
            now = time.monotonic()
            for name, node in self.nodes().items():
                if name not in names or name in reached:
                    continue
                if log is not None:
                    log(name, node, now)
                failed = node["provision_state"] in ("deploy failed", "error", "clean failed") or (
                    node["provision_state"] == "enroll" and node["target_provision_state"] is None
                    and node["last_error"])
                if failed:
                    raise RuntimeError(f"{name} is {node['provision_state']}: {node['last_error']}")
                if node["provision_state"] == state and node["target_provision_state"] is None \
                        and node["reservation"] is None:
                    reached[name] = now
            if now > deadline:
                raise TimeoutError(f"not {state} after {timeout} s: {sorted(set(names) - set(reached))}")
            time.sleep(1)
        return reached


# ----------------------------------------------------------------------------- the two sides

def start_corral(work: Path, lab: dict[str, str], http_root: Path, files: FileServer) -> ServerProcess:
    port = free_port()
    ramdisk_dir = os.path.dirname(lab["CORRAL_LAB_IPA_KERNEL"])
    config = write_config(work / "corral.conf", {
        "DEFAULT": {"host": "bench-corral"},
        "api": {"auth_strategy": "noauth", "ramdisk_heartbeat_timeout": 30},
        "conductor": {
            "deploy_kernel": f"file://{lab['CORRAL_LAB_IPA_KERNEL']}",
            "deploy_ramdisk": f"file://{lab['CORRAL_LAB_IPA_RAMDISK']}",
            "file_url_allowed_paths": ramdisk_dir, "automated_clean": False},
        "deploy": {"http_server": False, "http_root": http_root, "http_url": f"http://{GUEST_HOST}:{files.port}",
                   "external_http_url": files.process.url,
                   "external_callback_url": f"http://{GUEST_HOST}:{port}/baremetal/"},
    })
    args = [sys.executable, "-m", "corral", "serve", "--port", str(port), "--migrate", "--config-file", str(config),
            "--data-dir", str(work / "data")]
    server = ServerProcess("corral", args, f"http://127.0.0.1:{port}", work / "server.log",
                           env={"no_proxy": "*", "NO_PROXY": "*"}, cwd=HERE.parent)
    return server.wait_ready("/baremetal/", timeout=180)


def start_upstream(work: Path, lab: dict[str, str], http_root: Path, files: FileServer) -> ServerProcess:
    setup = read_env(UPSTREAM_DIR / "ironic.env")
    port = free_port()
    database = work / "ironic.sqlite"
    shutil.copyfile(setup["CORRAL_UPSTREAM_IRONIC_TEMPLATE_DB"], database)
    # Ironic runs "mkisofs" for the boot ISO; Debian's xorriso emulates it under that name.
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "mkisofs").symlink_to(shutil.which("xorrisofs") or "/usr/bin/xorrisofs")
    (work / "state").mkdir()
    config = write_config(work / "ironic.conf", {
        "DEFAULT": {
            "host": "bench-upstream", "rpc_transport": "none", "auth_strategy": "noauth", "use_stderr": "true",
            "minimum_memory_warning_only": "true", "state_path": work / "state",
            "isolinux_bin": lab["CORRAL_LAB_ISOLINUX"], "ldlinux_c32": lab["CORRAL_LAB_LDLINUX"],
            "enabled_hardware_types": "redfish", "enabled_boot_interfaces": "redfish-virtual-media",
            "enabled_deploy_interfaces": "direct", "enabled_power_interfaces": "redfish",
            "enabled_management_interfaces": "redfish", "enabled_inspect_interfaces": "no-inspect",
            "enabled_network_interfaces": "noop", "enabled_storage_interfaces": "noop",
            "enabled_vendor_interfaces": "no-vendor", "enabled_raid_interfaces": "no-raid",
            "enabled_bios_interfaces": "no-bios", "enabled_console_interfaces": "no-console",
            "enabled_firmware_interfaces": "no-firmware", "enabled_rescue_interfaces": "no-rescue",
        },
        "api": {"host_ip": "127.0.0.1", "port": port, "ramdisk_heartbeat_timeout": 30},
        "database": {"connection": f"sqlite:///{database}"},
        "dhcp": {"dhcp_provider": "none"},
        "conductor": {"automated_clean": False,
                      "file_url_allowed_paths": os.path.dirname(lab["CORRAL_LAB_IPA_KERNEL"]),
                      "deploy_kernel": f"file://{lab['CORRAL_LAB_IPA_KERNEL']}",
                      "deploy_ramdisk": f"file://{lab['CORRAL_LAB_IPA_RAMDISK']}"},
        "deploy": {"http_root": http_root, "http_url": f"http://{GUEST_HOST}:{files.port}",
                   "external_http_url": files.process.url,
                   "external_callback_url": f"http://{GUEST_HOST}:{port}"},
        # The agent-facing API URL, which the conductor also resolves (then overridden by the above).
        "service_catalog": {"endpoint_override": f"http://{GUEST_HOST}:{port}"},
        "oslo_concurrency": {"lock_path": work / "locks"},
    })
    env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "no_proxy": "*", "NO_PROXY": "*"}
    server = ServerProcess("upstream", [setup["CORRAL_UPSTREAM_IRONIC_BIN"], "--config-file", str(config)],
                           f"http://127.0.0.1:{port}", work / "server.log", env=env, cwd=work)
    server.wait_ready("/v1", timeout=180)
    return server


SIDES = {"corral": (start_corral, "/baremetal"), "upstream": (start_upstream, "")}


def run_side(side: str, work: Path, lab: dict[str, str], machines: Machines, emulator: Emulator,
             image_url: str, sha256: str) -> dict[str, Any]:
    start, prefix = SIDES[side]
    for machine in machines.machines:
        subprocess.run(["virsh", "-q", "-c", machines.uri, "destroy", machine["name"]], capture_output=True,
                       check=False)
    http_root = work / "httpboot"
    http_root.mkdir(parents=True)
    files = FileServer(http_root, "127.0.0.1", work / "http.log")
    server: ServerProcess | None = None
    try:
        server = start(work, lab, http_root, files)
        api = Api(server.url + prefix)
        names = []
        for index, machine in enumerate(machines.machines):
            spec = machine["spec"]
            name = f"bench-{index}"
            names.append(name)
            node = api.call("POST", "/v1/nodes", 201, json={
                "name": name, "driver": "redfish", "boot_interface": "redfish-virtual-media",
                "deploy_interface": "direct", "automated_clean": False,
                "properties": {"capabilities": "boot_mode:bios"},
                "driver_info": {
                    "redfish_address": emulator.url, "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}",
                    # QEMU's user network hides the agent: it advertises its forwarded port's host side.
                    "kernel_append_params": f"%default% console=ttyS0,115200 ipa-advertise-host=127.0.0.1 "
                                            f"ipa-advertise-port={spec.agent_port}"}})
            api.call("POST", "/v1/ports", 201, json={"node_uuid": node["uuid"], "address": spec.mac})
            api.call("PUT", f"/v1/nodes/{name}/states/provision", 202, json={"target": "manage"})
        api.wait(names, "manageable", 120)
        for name in names:
            api.call("PUT", f"/v1/nodes/{name}/states/provision", 202, json={"target": "provide"})
        api.wait(names, "available", 120)
        uuids = {name: node["uuid"] for name, node in api.nodes().items()}
        for name in names:
            api.call("PATCH", f"/v1/nodes/{name}", 200, json=[{"op": "add", "path": "/instance_info", "value": {
                "image_source": image_url, "image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
                "image_disk_format": "raw"}}])

        roots = [server.process.pid]
        idle_before = tree_cpu_seconds(roots)
        time.sleep(IDLE_SECONDS)
        idle_cpu_per_s = (tree_cpu_seconds(roots) - idle_before) / IDLE_SECONDS

        timeline: dict[str, list[tuple[float, str, str | None, bool]]] = {name: [] for name in names}
        loads: list[float] = [os.getloadavg()[0]]

        def log(name: str, node: dict[str, Any], now: float) -> None:
            # (an agent that has heartbeated is recorded by both servers as agent_url)
            seen = (node["provision_state"], node["power_state"],
                    "agent_url" in (node.get("driver_internal_info") or {}))
            if not timeline[name] or tuple(timeline[name][-1][1:]) != seen:
                timeline[name].append((round(now - started, 1), *seen))

        cpu_before, files_before = tree_cpu_seconds(roots), tree_cpu_seconds([files.process.process.pid])
        started, started_at = time.monotonic(), time.time()
        for name in names:
            api.call("PUT", f"/v1/nodes/{name}/states/provision", 202, json={"target": "active", "configdrive": {
                "meta_data": {"uuid": uuids[name], "name": name, "hostname": name, "public_keys": {"0": PUBLIC_KEY}},
                "user_data": f"#cloud-config\nhostname: {name}\n"}})

        def log_and_load(name: str, node: dict[str, Any], now: float) -> None:
            log(name, node, now)
            if name == names[0]:
                loads.append(os.getloadavg()[0])

        reached = api.wait(names, "active", DEPLOY_TIMEOUT, log_and_load)
        finished = time.monotonic()
        cpu = tree_cpu_seconds(roots) - cpu_before
        files_cpu = tree_cpu_seconds([files.process.process.pid]) - files_before
        wall = finished - started
        per_node = sorted(round(at - started, 1) for at in reached.values())
        shown = api.nodes()
        return {
            "side": side, "requested_at": time.strftime("%H:%M:%S", time.gmtime(started_at)),
            "nodes": len(names), "wall_to_all_active_s": round(wall, 1),
            "to_active_s": per_node, "to_active_p50_s": round(statistics.median(per_node), 1),
            "cpu_s_per_deploy": round(cpu / len(names), 2), "cpu_s_total": round(cpu, 2),
            "idle_cpu_s_per_s": round(idle_cpu_per_s, 3),
            # what the deploys cost beyond the server's idle rate over the same span
            "cpu_s_per_deploy_above_idle": round((cpu - idle_cpu_per_s * wall) / len(names), 2),
            "file_server_cpu_s_per_deploy": round(files_cpu / len(names), 2),
            "load_average_1m": {"start": round(loads[0], 2), "max": round(max(loads), 2),
                                "mean": round(statistics.mean(loads), 2)},
            "power_states": {name: node["power_state"] for name, node in shown.items()},
            "phases_s": {name: phases(timeline[name]) for name in names},
            "timeline": timeline,
        }
    finally:
        if server is not None:
            server.stop()
        files.stop()


def phases(timeline: list[list[Any]]) -> dict[str, float] | None:
    """A node's deploy in three parts, from its polled states (1 s resolution).

    ``prepare``: the request to ``wait call-back`` (the server builds the boot ISO, the BMC
    inserts it, the machine is powered on); ``agent``: from then to the agent's first
    heartbeat having been handled (the machine boots the agent, which looks its node up);
    ``write``: from then to ``active`` (image, config drive, the agent's power-off, the
    power-on from disk).
    """
    waiting = next((entry[0] for entry in timeline if entry[1] == "wait call-back"), None)
    heartbeat = next((entry[0] for entry in timeline if len(entry) > 3 and entry[3]), None)
    active = next((entry[0] for entry in timeline if entry[1] == "active"), None)
    if waiting is None or heartbeat is None or active is None:
        return None
    return {"prepare": waiting, "agent": round(heartbeat - waiting, 1), "write": round(active - heartbeat, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sides", default="corral,upstream", help="comma-separated, in round 1's order")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="keep each run's logs and configuration here")
    args = parser.parse_args()
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    for side in sides:
        if side not in SIDES:
            raise SystemExit(f"unknown side {side!r}")
    lab = read_env(LAB_DIR / "lab.env")
    for key in ("CORRAL_LAB_IPA_KERNEL", "CORRAL_LAB_IPA_RAMDISK", "CORRAL_LAB_KERNEL_DEB"):
        if not os.path.exists(lab.get(key, "")):
            raise SystemExit(f"{key} missing from {LAB_DIR / 'lab.env'}: run tools/baremetal-lab setup")

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bm-lab-deploy-") as scratch_name, \
            guest_network_blackholed(), loopback_address(IMAGE_ADDRESS):
        scratch = Path(scratch_name)
        raw, _ = disk_image.build(lab["CORRAL_LAB_KERNEL"], lab["CORRAL_LAB_KERNEL_DEB"], scratch / "image")
        (scratch / "images").mkdir()
        (scratch / "images" / "disk.raw").write_bytes(raw)
        images = FileServer(scratch / "images", IMAGE_ADDRESS, scratch / "images.log")
        image_url, sha256 = f"{images.process.url}/disk.raw", hashlib.sha256(raw).hexdigest()
        specs = [MachineSpec("bios", memory_mib=1536, disks=[(5 * GIB, f"bench-root-{index}")],
                             mac=f"52:54:00:c1:bb:{index:02x}", agent_port=free_port())
                 for index in range(args.nodes)]
        machines = Machines(lab, specs)
        emulator = None
        try:
            allowed = ", ".join(repr(m["uuid"]) for m in machines.machines)
            emulator = Emulator(str(scratch / "redfish"), (
                f"SUSHY_EMULATOR_LIBVIRT_URI = {lab['CORRAL_LAB_LIBVIRT_URI']!r}\n"
                f"SUSHY_EMULATOR_STORAGE_POOL = {lab['CORRAL_LAB_POOL']!r}\n"
                f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{allowed}]\n"))
            for round_number in range(1, args.rounds + 1):
                order = sides if round_number % 2 else list(reversed(sides))
                for side in order:
                    work = scratch / f"round{round_number}-{side}"
                    work.mkdir()
                    try:
                        result = run_side(side, work, lab, machines, emulator, image_url, sha256)
                    except Exception as error:  # a failed run is reported, the others still run
                        result = {"side": side, "error": str(error)[:3000]}
                    result["round"] = round_number
                    results.append(result)
                    print(json.dumps({key: value for key, value in result.items() if key != "timeline"}),
                          flush=True)
                    for machine in machines.machines:
                        (work / f"{machine['name']}.serial.log").write_text(machines.serial(machine))
                        with open(machine["serial"], "w"):
                            pass  # each run's console on its own
                    if args.keep:
                        shutil.copytree(work, args.keep / work.name, dirs_exist_ok=True,
                                        ignore=shutil.ignore_patterns("*.sqlite", "httpboot", "data", "state"))
        finally:
            if emulator is not None:
                emulator.stop()
            machines.remove()
            images.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print()
    print(f"{'round':>5} {'side':<9} {'nodes':>5} {'all active s':>12} {'p50 s':>6} {'CPU s/deploy':>12} "
          f"{'above idle':>10} {'idle CPU s/s':>12} {'http.server s':>13} {'load':>10}")
    for result in results:
        if "error" in result:
            print(f"{result['round']:>5} {result['side']:<9} failed: {result['error'][:300]}")
            continue
        load = result["load_average_1m"]
        print(f"{result['round']:>5} {result['side']:<9} {result['nodes']:>5} {result['wall_to_all_active_s']:>12} "
              f"{result['to_active_p50_s']:>6} {result['cpu_s_per_deploy']:>12} "
              f"{result['cpu_s_per_deploy_above_idle']:>10} {result['idle_cpu_s_per_s']:>12} "
              f"{result['file_server_cpu_s_per_deploy']:>13} {load['mean']:>4}-{load['max']}")


if __name__ == "__main__":
    os.environ.pop("http_proxy", None)
    os.environ.pop("HTTP_PROXY", None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
