"""Server routes (stats, health, readiness, metrics, backup) and the errors a client meets
before or around a route: tokens, web-page checks, unknown routes and methods, oversized
headers, drain mode, a full disk, no server, a server that does not answer."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

import delayq
from conftest import local_only, redis_only, wait_for
from server import Server, redis_seeds


def test_stats_count_the_jobs(client: delayq.Client, tube: str) -> None:
    before = client.stats()
    client.put(tube, "x")
    client.put(tube, "y", delay="1h")
    stats = client.stats()
    assert stats.version == delayq.__version__ and not stats.draining
    assert stats.mode == ("redis" if redis_seeds() is not None else "local")
    assert stats.health.status == "ok" and stats.uptime >= timedelta(0)
    assert stats.total_jobs == before.total_jobs + 2
    assert stats.delayed >= 1 and stats.ready >= 1 and stats.tubes >= 2
    assert stats.connections.get("http", 0) >= 1
    assert stats.fire_lateness.buckets[-1].le_ms is None


def test_health_ready_and_metrics(client: delayq.Client) -> None:
    assert client.health() == "ok"
    assert client.ready() == "ready"
    metrics = client.metrics()
    assert "# TYPE delayq_jobs gauge" in metrics and "delayq_operations_total" in metrics


@local_only("backups answer 501 unsupported (back up Redis instead)")
def test_backup_copies_the_data_directory(server: Server, client: delayq.Client, tube: str) -> None:
    client.put(tube, "kept")
    target = server.dir / "backup-1"
    backup = client.backup(str(target))
    assert backup.dir == str(target) and backup.jobs >= 1 and backup.bytes > 0
    assert target.is_dir() and any(target.iterdir())
    with pytest.raises(delayq.BadRequest):
        client.backup(str(target))  # exists already
    with pytest.raises(delayq.BadRequest):
        client.backup("relative/dir")


@redis_only
def test_redis_mode_answers_unsupported_for_a_backup(server: Server, client: delayq.Client) -> None:
    with pytest.raises(delayq.Unsupported):
        client.backup(str(server.dir / "backup"))


def test_unknown_routes_and_methods(client: delayq.Client) -> None:
    with pytest.raises(delayq.NoRoute) as error:
        client.request("GET", "/v1/nothing-here")
    assert error.value.status == 404
    with pytest.raises(delayq.MethodNotAllowed):
        client.request("PUT", "/v1/stats")
    assert client.request("GET", "/v1/stats")["version"] == delayq.__version__


def test_a_web_pages_origin_is_forbidden(server: Server) -> None:
    with delayq.Client(server.url, headers={"Origin": "http://evil.example"}) as page:
        with pytest.raises(delayq.Forbidden) as error:
            page.stats()
    assert error.value.status == 403


def test_headers_over_8_kib_are_refused(server: Server) -> None:
    with delayq.Client(server.url, headers={"X-Padding": "a" * 9000}) as big:
        with pytest.raises(delayq.HeadersTooLarge) as error:
            big.stats()
    assert error.value.status == 431


def test_a_server_with_tokens_wants_one(tmp_path: Path, tube: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# the test's token\nsecret-token-1\n")
    with Server("--http-token-file", str(tokens)) as own:
        with delayq.Client(own.url) as anonymous:
            with pytest.raises(delayq.Unauthorized) as error:
                anonymous.put(tube, "x")
            assert error.value.status == 401
            assert anonymous.health() == "ok"  # left open for probes
        with delayq.Client(own.url, token="wrong") as wrong:
            with pytest.raises(delayq.Unauthorized):
                wrong.stats()
        with delayq.Client(own.url, token="secret-token-1") as allowed:
            assert allowed.put(tube, "x").state == "ready"
        monkeypatch.setenv("DELAYQ_SERVER", own.url)
        monkeypatch.setenv("DELAYQ_TOKEN", "secret-token-1")
        with delayq.Client.from_env() as configured:  # as the delayq CLI reads them
            assert configured.tube_stats(tube).ready == 1


def test_a_draining_server_refuses_puts_and_serves_the_rest(tube: str) -> None:
    with Server() as own, delayq.Client(own.url) as c:
        job = c.put(tube, "before")
        own.signal(signal.SIGUSR1)  # drain mode, sent to our own server by its PID
        wait_for(lambda: c.stats().draining, what="drain mode")
        with pytest.raises(delayq.Draining) as error:
            c.put(tube, "after")
        assert error.value.status == 503 and isinstance(error.value, delayq.ServiceUnavailable)
        with pytest.raises(delayq.Draining):
            c.ready()
        reserved = c.reserve(tube)
        assert reserved is not None and reserved.id == job.id
        assert c.delete_job(job.id) == job.id


@local_only("no_space comes from Redis's maxmemory, not --min-free-disk")
def test_a_full_disk_refuses_puts(tube: str) -> None:
    with Server("--min-free-disk", "1125899906842624") as own, delayq.Client(own.url) as c:
        with pytest.raises(delayq.NoSpace) as error:
            c.put(tube, "x")
        assert error.value.status == 507 and error.value.code == "no_space"
        with pytest.raises(delayq.NoSpace) as ready_error:
            c.ready()
        assert ready_error.value.status == 503
        assert c.health() == "ok"


def test_https_with_the_servers_certificate_trusted(tmp_path: Path, tube: str) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command makes the certificate; it is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    with Server("--tls-cert", str(cert), "--tls-key", str(key)) as own:
        https = own.url.replace("http://", "https://")
        with delayq.Client(https, ca_file=str(cert)) as trusted:
            assert trusted.put(tube, "over tls").state == "ready"
            assert trusted.stats().version == delayq.__version__
        with delayq.Client(https, timeout=5) as untrusting:
            with pytest.raises(delayq.TransportError, match="certificate"):
                untrusting.stats()
        with delayq.Client(own.url, timeout=2) as plain:
            with pytest.raises(delayq.TransportError):
                plain.stats()


def test_no_server_is_a_transport_error() -> None:
    with Server() as own:
        url = own.url
    with delayq.Client(url, timeout=2) as c:
        with pytest.raises(delayq.TransportError) as error:
            c.stats()
    assert error.value.status == 0 and isinstance(error.value, delayq.DelayqError)


def test_a_server_that_never_answers_times_out() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        with delayq.Client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5) as c:
            started = time.monotonic()
            with pytest.raises(delayq.TransportError, match="no answer"):
                c.stats()
            assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_client_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        delayq.Client("ftp://127.0.0.1:8080")
    with pytest.raises(ValueError):
        delayq.Client(timeout=0)
