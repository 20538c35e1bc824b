"""Prometheus metrics, read through ``corral serve``'s listener as Prometheus reads them.

One server (one worker, background work in it) serves most tests here: its
image database is an unused port, its metrics listener wants credentials
and the conductor counts nodes every second.  Another runs two workers,
and a third the defaults (no metrics at all).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from corral.core import config, metrics, startup
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

USER, PASSWORD = "prometheus", "scrape-secret"
DB_PASSWORD = "db-hunter2"
ADMIN = {"X-Auth-Token": "admin"}
BAREMETAL = {**ADMIN, "X-OpenStack-Ironic-API-Version": "1.80"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _unused_port() -> int:
    """A port nothing listens on (bound once, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def eventually(condition: Callable[[], Any], timeout: float = 60.0) -> Any:
    """``condition()``'s first true value, polling (the timeout only bounds a failure)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


class Server:
    def __init__(self, process: CorralProcess, metrics_url: str | None, auth: tuple[str, str] | None = None) -> None:
        self.process = process
        self.url = process.url
        self.metrics_url = metrics_url
        self.auth = auth

    def scrape(self) -> Samples:
        assert self.metrics_url is not None
        response = requests.get(self.metrics_url, auth=self.auth, timeout=30)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(response.text)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp_path = tmp_path_factory.mktemp("metrics")
    data_dir = tmp_path / "state"
    data_dir.mkdir()
    users = tmp_path / "metrics-htpasswd"
    users.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    metrics_port = free_port()
    config_file = write_config(tmp_path / "corral.conf", {
        "api": {"auth_strategy": "noauth2"},
        "metrics": {"listen": f"127.0.0.1:{metrics_port}", "http_basic_auth_user_file": users,
                    "refresh_interval": 1},
        # Nothing listens there: every request to the image service needs it.
        "image_database": {"connection": f"postgresql://corral:{DB_PASSWORD}@127.0.0.1:{_unused_port()}/image"},
    })
    process = CorralProcess(config_file, data_dir).start(wait_path="/placement/")
    try:
        yield Server(process, f"http://127.0.0.1:{metrics_port}/metrics", (USER, PASSWORD))
    finally:
        process.stop()


def test_a_request_is_counted_under_its_route_template(server: Server) -> None:
    before = server.scrape()
    provider = "4e8e5957-649f-477a-938e-f9bb1ec1d3a0"
    for _ in range(3):
        response = requests.get(f"{server.url}/placement/resource_providers/{provider}", headers=ADMIN, timeout=30)
        assert response.status_code == 404
    labels = {"service": "placement", "route": "/resource_providers/{uuid}", "method": "GET"}
    after = server.scrape()
    counted = value(after, "corral_http_requests_total", **labels, status="404") or 0.0
    assert counted - (value(before, "corral_http_requests_total", **labels, status="404") or 0.0) == 3
    observed = value(after, "corral_http_request_duration_seconds_count", **labels) or 0.0
    assert observed - (value(before, "corral_http_request_duration_seconds_count", **labels) or 0.0) == 3
    # The raw path is in no label.
    assert not any(provider in str(key) for key in after)


def test_paths_nothing_serves_share_one_label(server: Server) -> None:
    for path in ("/no-such-service/a1", "/no-such-service/b2", "/placement/nothing/c3"):
        response = requests.request("PROPFIND", server.url + path, headers=ADMIN, timeout=30)
        assert response.status_code in (404, 405)
    samples = server.scrape()
    routes = {dict(labels).get("route") for (name, labels) in samples if name == "corral_http_requests_total"}
    assert metrics.UNMATCHED in routes
    assert not any(route and re.search(r"a1|b2|c3", route) for route in routes)
    methods = {dict(labels).get("method") for (name, labels) in samples if name == "corral_http_requests_total"}
    assert "PROPFIND" not in methods and "other" in methods


def test_an_unreachable_database_shows_as_down_and_unavailable(server: Server) -> None:
    before = value(server.scrape(), "corral_db_unavailable_total", database="image") or 0.0
    for _ in range(2):
        response = requests.get(f"{server.url}/image/v2/images", headers=ADMIN, timeout=30)
        assert response.status_code == 503
    samples = server.scrape()
    assert (value(samples, "corral_db_unavailable_total", database="image") or 0.0) - before >= 2
    assert value(samples, "corral_db_up", database="image") == 0
    assert value(samples, "corral_db_up", database="placement") == 1
    assert value(samples, "corral_http_requests_total", service="image", route="/v2/images", method="GET",
                 status="503") is not None
    # Databases are named, never shown by URL or credentials.
    text = requests.get(server.metrics_url or "", auth=server.auth, timeout=30).text
    assert DB_PASSWORD not in text and "postgresql" not in text and "127.0.0.1" not in text


def test_the_node_state_gauge_follows_a_node_through_manage_and_provide(server: Server) -> None:
    response = requests.post(f"{server.url}/baremetal/v1/nodes", headers=BAREMETAL, timeout=30,
                             json={"driver": "fake-hardware", "name": "metered"})
    assert response.status_code == 201, response.text

    def counted(state: str, expected: dict[str, float]) -> bool:
        node = requests.get(f"{server.url}/baremetal/v1/nodes/metered", headers=BAREMETAL, timeout=30).json()
        if node["provision_state"] != state:
            return False
        samples = server.scrape()
        return all(value(samples, "corral_baremetal_nodes", provision_state=name) == number
                   for name, number in expected.items())

    assert eventually(lambda: counted("enroll", {"enroll": 1, "manageable": 0, "available": 0}))
    for verb, state in (("manage", "manageable"), ("provide", "available")):
        response = requests.put(f"{server.url}/baremetal/v1/nodes/metered/states/provision", headers=BAREMETAL,
                                json={"target": verb}, timeout=30)
        assert response.status_code == 202, response.text
        expected = {"enroll": 0, "manageable": 0, "available": 0, state: 1}
        assert eventually(lambda: counted(state, expected)), server.scrape()
    samples = server.scrape()
    assert value(samples, "corral_baremetal_conductors_alive") == 1
    # The verbs ran on the conductor's workers, and its periodic tasks ran.
    assert (value(samples, "corral_conductor_tasks_total", conductor=_conductor(samples)) or 0) >= 2
    assert (value(samples, "corral_periodic_task_runs_total", task="report_metrics") or 0) >= 3
    assert value(samples, "corral_periodic_task_failures_total", task="report_metrics") == 0


def _conductor(samples: Samples) -> str:
    (name,) = {dict(labels)["conductor"] for (metric, labels) in samples if metric == "corral_conductor_tasks_total"}
    return name


def test_the_listener_wants_credentials_and_serves_metrics_alone(server: Server) -> None:
    assert server.metrics_url is not None
    refused = requests.get(server.metrics_url, timeout=30)
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith("Basic")
    assert "corral_" not in refused.text
    assert requests.get(server.metrics_url, auth=(USER, "wrong"), timeout=30).status_code == 401
    assert requests.get(server.metrics_url.replace("/metrics", "/placement/"), auth=server.auth,
                        timeout=30).status_code == 404
    # Not on the API port either.
    assert requests.get(server.url + "/metrics", headers=ADMIN, timeout=30).status_code == 404
    samples = server.scrape()
    assert value(samples, "corral_processes", role="all") == 1
    assert (value(samples, "corral_db_pool_capacity", database="placement") or 0) > 0


def test_two_workers_report_every_request_and_the_background_process(data_dir: Path, tmp_path: Path) -> None:
    metrics_port = free_port()
    config_file = write_config(tmp_path / "corral.conf", {
        "api": {"auth_strategy": "noauth2"}, "metrics": {"listen": str(metrics_port)}})
    process = CorralProcess(config_file, data_dir, extra_args=["--workers", "2", "--threads", "2"])
    process.start(wait_path="/placement/")
    server = Server(process, f"http://127.0.0.1:{metrics_port}/metrics")
    try:
        sent = 0
        # New connections until both workers have answered some (the access log names each worker's pid).
        while len(_serving_pids(process)) < 2 and sent < 500:
            requests.get(f"{server.url}/placement/resource_providers", headers=ADMIN, timeout=30)
            sent += 1
        assert len(_serving_pids(process)) == 2
        samples = server.scrape()
        assert value(samples, "corral_http_requests_total", service="placement", route="/resource_providers",
                     method="GET", status="200") == sent
        assert value(samples, "corral_processes", role="api") == 2
        assert eventually(lambda: value(server.scrape(), "corral_processes", role="background") == 1)
        # A worker that dies is replaced: its live gauges go, its counts stay.
        assert process.process is not None
        master = process.process.pid
        children = _children(master)
        victim = int(sorted(_serving_pids(process))[0])
        assert victim in children
        os.kill(victim, signal.SIGKILL)
        assert eventually(lambda: victim not in _children(master) and len(_children(master)) == len(children))
        assert eventually(lambda: value(server.scrape(), "corral_processes", role="api") == 2)
        samples = server.scrape()
        assert value(samples, "corral_processes", role="api") == 2
        assert value(samples, "corral_http_requests_total", service="placement", route="/resource_providers",
                     method="GET", status="200") == sent
    finally:
        process.stop()


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def _serving_pids(process: CorralProcess) -> set[str]:
    return set(re.findall(r"^\S+ \S+ (\d+) INFO corral\.access: .*GET /placement/resource_providers\" 200",
                          process.log(), flags=re.M))


def test_no_metrics_are_served_or_written_by_default(data_dir: Path, tmp_path: Path) -> None:
    config_file = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config_file, data_dir, role="api").start(wait_path="/placement/")
    try:
        assert requests.get(process.url + "/metrics", headers=ADMIN, timeout=30).status_code == 404
        assert requests.get(process.url + "/placement/", timeout=30).status_code == 200
    finally:
        process.stop()
    assert not (data_dir / "metrics").exists()
    assert "metrics:" not in process.log()


def test_a_listener_open_to_the_network_needs_credentials_or_consent(tmp_path: Path) -> None:
    def conf(**values: Any) -> Any:
        return config.make_conf([], state_path=str(tmp_path), services=[], overrides={"metrics": values})

    with pytest.raises(startup.StartupError, match="not a loopback address"):
        startup.check_metrics(conf(listen=f"0.0.0.0:{free_port()}"))
    startup.check_metrics(conf(listen=f"0.0.0.0:{free_port()}", allow_network=True))
    startup.check_metrics(conf(listen=str(free_port())))
    assert startup.metrics_address(conf(listen="9464")) == ("127.0.0.1", 9464)
    assert startup.metrics_address(conf(listen="[::1]:9464")) == ("::1", 9464)
    assert startup.metrics_address(conf()) is None
    with pytest.raises(startup.StartupError, match=r"\[metrics\] listen"):
        startup.metrics_address(conf(listen="127.0.0.1:http"))
    with pytest.raises(startup.StartupError, match="port of its own"):
        startup.check_metrics(conf(listen="6385"), api_port=6385)


def test_a_checkout_that_finds_the_pool_full_is_counted_as_a_wait_and_a_timeout(tmp_path: Path) -> None:
    import sqlalchemy as sa

    name = f"test_pool_{tmp_path.name}"
    pool_class = metrics.metered_pool_class(sa.pool.QueuePool, name)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'pool.sqlite'}", poolclass=pool_class, pool_size=1,
                              max_overflow=0, pool_timeout=0.2)

    def count(metric: str) -> float:
        return metrics.REGISTRY.get_sample_value(metric, {"database": name}) or 0.0

    try:
        with engine.connect():
            assert count("corral_db_pool_waits_total") == 0
            with pytest.raises(sa.exc.TimeoutError):
                engine.connect()
        with engine.connect():  # a free connection again: no wait
            pass
        engine.dispose()  # the pool made again from its class still counts
        with engine.connect(), pytest.raises(sa.exc.TimeoutError):
            engine.connect()
    finally:
        engine.dispose()
    assert count("corral_db_pool_waits_total") == 2
    assert count("corral_db_pool_timeouts_total") == 2


ROOT = Path(__file__).resolve().parents[2]


def _exported_names() -> set[str]:
    names = set()
    for metric in metrics.REGISTRY.collect():
        names.add(metric.name + ("_total" if metric.type == "counter" else ""))
    return names


def test_every_metric_is_documented_and_the_dashboard_reads_only_metrics_that_exist() -> None:
    import json

    exported = _exported_names()
    assert len(exported) == len(metrics._ALL)
    documented = set(re.findall(r"^\| `(corral_\w+)` \|", (ROOT / "docs" / "metrics.md").read_text(), flags=re.M))
    assert documented == exported
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    used = {re.sub(r"_(bucket|sum|count)$", "", name) for expr in exprs for name in re.findall(r"corral_\w+", expr)}
    assert used <= exported, used - exported
    # Requests, errors, latencies, pools, queues, nodes, the snapshot and cells all have panels.
    for name in ("corral_http_requests_total", "corral_http_request_duration_seconds", "corral_db_pool_checked_out",
                 "corral_conductor_tasks_waiting", "corral_baremetal_nodes",
                 "corral_placement_snapshot_positions_behind", "corral_compute_cell_up"):
        assert name in used
