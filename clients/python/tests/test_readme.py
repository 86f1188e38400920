"""Every example of clients/python/README.md, run against the test server.

The README's ```python blocks run in order, each in a fresh namespace, with the server's
address for the README's http://127.0.0.1:8080 and, in the receiver's, the address of a
receiver this test hosts for 127.0.0.1:9000. `print` is recorded, so that what each example
prints can be checked. A block's `if __name__ == "__main__":` part (a server that would run
for ever) does not run: the test runs what it would, bounded: the worker's run() in a thread
until the jobs are done, the receiver's application behind a WSGI server of its own. The
install table is checked too: pip installs the package from a copy of this directory, and
the source tree imports as it is with PYTHONPATH."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

import delayq
from conftest import deleted, gone, wait_for
from receivers import WsgiHost
from server import Server

PACKAGE_DIR = Path(__file__).resolve().parents[1]
README = (PACKAGE_DIR / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)


def run_block(index: int, server: Server, printed: list[str], **addresses: str) -> dict[str, Any]:
    code = BLOCKS[index]
    assert "http://127.0.0.1:8080" in code, "each example names the server it talks to"
    code = code.replace("http://127.0.0.1:8080", server.url)
    for readme_address, test_address in addresses.items():
        code = code.replace(readme_address, test_address)

    def record(*args: Any, **kwargs: Any) -> None:
        printed.append(" ".join(str(arg) for arg in args))

    namespace: dict[str, Any] = {"__name__": "readme_example", "print": record}
    exec(compile(code, f"README.md python block {index + 1}", "exec"), namespace)
    return namespace


def test_the_readme_has_the_examples_this_test_checks() -> None:
    assert len(BLOCKS) == 5


def test_every_example_in_order(server: Server, client: delayq.Client) -> None:
    for tube in ("emails", "reminders"):  # this test's own tubes: no other test uses them
        for job in client.list_group(tube, "user:42"):
            client.delete_job(job.id)
    checks: list[Callable[[], None]] = [
        lambda: check_put(server, client), lambda: check_reschedule(server, client),
        lambda: check_worker(server, client), lambda: check_jobs(server, client),
        lambda: check_receiver(server, client)]
    assert len(checks) == len(BLOCKS)
    for check in checks:
        check()


def check_put(server: Server, client: delayq.Client) -> None:
    printed: list[str] = []
    ns = run_block(0, server, printed)
    job = ns["job"]
    assert printed == [f"{job.id} delayed {job.due}", str(["delayed"] * 3)]
    for user, answer in zip((42, 43, 44), ns["answers"]):
        assert client.get_key("digests", f"digest:{user}").id == answer.id
    held = client.get_key("emails", "welcome:42")
    assert held.id == job.id and held.state == "delayed" and held.json() == {"user": 42}
    assert timedelta(hours=47) < held.due - held.created <= timedelta(hours=48)
    [invoice] = client.list_group("emails", "user:42")
    assert client.get_job(invoice.id).text == "invoice 7" and invoice.priority == 10


def check_reschedule(server: Server, client: delayq.Client) -> None:
    printed: list[str] = []
    run_block(1, server, printed)
    assert printed == ["ready", "1 cancelled"]
    assert client.get_key("emails", "welcome:42").state == "ready"
    assert client.list_group("emails", "user:42") == []


def check_worker(server: Server, client: delayq.Client) -> None:
    printed: list[str] = []
    ns = run_block(2, server, printed)
    worker: delayq.Worker = ns["worker"]
    welcome = client.get_key("emails", "welcome:42")
    runner = threading.Thread(target=worker.run)  # what `python3 worker.py` would do
    runner.start()
    try:
        wait_for(lambda: printed == ["welcome mail to user 42"], what="the handler's output")
        wait_for(lambda: worker.handled == 1, what="the job handled")
    finally:
        worker.stop()
        runner.join(15)
    assert not runner.is_alive()
    with pytest.raises(delayq.NotFound):
        client.get_job(welcome.id)


def check_jobs(server: Server, client: delayq.Client) -> None:
    ids = [client.put("emails", f"mail {i}").id for i in range(2)]
    printed: list[str] = []
    run_block(3, server, printed)
    # Both, each once; in Redis mode two puts of one millisecond may land in two shards, and
    # their order is then the order of their ids, not of the puts (docs/redis-mode.md).
    assert sorted(printed) == sorted([f"job {ids[0]} mail 0", f"job {ids[1]} mail 1"])
    for job_id in ids:
        with pytest.raises(delayq.NotFound):
            client.get_job(job_id)


def check_receiver(server: Server, client: delayq.Client) -> None:
    namespace: dict[str, Any] = {}

    def forward(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        application: delayq.WsgiVerifier = namespace["application"]
        return application(environ, start)

    host = WsgiHost(forward)
    printed: list[str] = []
    try:
        namespace.update(run_block(4, server, printed, **{"127.0.0.1:9000": host.address}))
        assert isinstance(namespace["application"], delayq.WsgiVerifier)
        hook = client.get_webhook("reminders")
        assert hook.url == f"http://{host.address}/hook" and hook.secrets == 1
        job = client.put("reminders", "call the dentist")
        wait_for(lambda: printed, what="the receiver's output")
        assert printed == [f"job {job.id} b'call the dentist'"]
        wait_for(lambda: gone(client, job.id), what="the delivered job's delete")
        # Signed with a secret the application does not accept: 401, the job is kept.
        client.set_webhook("reminders", f"http://{host.address}/hook", secrets=["other"])
        refused = client.put("reminders", "forged")
        wait_for(lambda: client.get_job(refused.id).last_status == 401, what="a 401")
        assert len(printed) == 1
        # In Redis mode the deliverer keeps the 401 and releases the job in two calls: between
        # them, and during its next attempts, the job is reserved (409), so the delete is retried.
        wait_for(lambda: deleted(client, refused.id), what="the refused job's delete")
    finally:
        client.remove_webhook("reminders")
        host.stop()


def test_pip_installs_the_package_offline(tmp_path: Path) -> None:
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip(f"{sys.executable} has no pip")
    source = tmp_path / "python"
    shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                    "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                    "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=120,
                   env={"PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1", "HOME": str(tmp_path)})
    assert (target / "delayq" / "py.typed").is_file()
    assert list(target.glob("delayq-0.1.0.dist-info"))
    check = "import delayq, sys; print(delayq.__version__, delayq.__file__)"
    for path in (target, PACKAGE_DIR):
        out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                             check=True, timeout=30, cwd=tmp_path,
                             env={"PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"})
        version, where = out.stdout.split()
        assert version == "0.1.0" and where.startswith(str(path))
