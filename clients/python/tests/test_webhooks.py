"""Webhooks: set, get, remove over the API, and the Delayq-Signature of real deliveries checked
by verify_signature, WsgiVerifier and AsgiVerifier (good, wrong secret, the second secret,
stale, tampered); plus the signature rules on hand-made headers."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import io
import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import pytest

import delayq
from conftest import gone, wait_for, wait_for_job
from receivers import Recorder, WsgiHost, Request


def sign(secret: str, t: int, body: bytes) -> str:
    """A v1 signature as docs/webhooks.md defines it."""
    return hmac.new(secret.encode(), str(t).encode() + b"." + body, hashlib.sha256).hexdigest()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    receiver = Recorder()
    yield receiver
    receiver.stop()


# --- the webhook routes ---------------------------------------------------------------------


def test_set_get_and_remove_a_webhook(client: delayq.Client, tube: str) -> None:
    hook = client.set_webhook(
        tube, "http://127.0.0.1:9/delayq", headers={"Authorization": "Bearer 7f3c9a"},
        timeout=timedelta(seconds=5), max_attempts=10, backoff_min="2s",
        backoff_max=timedelta(minutes=10), backoff_factor=3, rate=0.25, concurrency=4,
        secrets=["whsec-new", "whsec-old"])
    assert hook.url == "http://127.0.0.1:9/delayq"
    assert hook.headers == {"Authorization": "Bearer 7f3c9a"}
    assert hook.timeout == timedelta(seconds=5) and hook.max_attempts == 10
    assert (hook.backoff.min, hook.backoff.max, hook.backoff.factor) == (
        timedelta(seconds=2), timedelta(minutes=10), 3.0)
    assert hook.rate == 0.25 and hook.concurrency == 4 and hook.secrets == 2
    assert client.get_webhook(tube) == hook
    assert {t.name: t.webhook_url for t in client.list_tubes()}[tube] == hook.url
    # A PUT replaces the whole webhook: what is left out takes its default.
    plain = client.set_webhook(tube, "http://127.0.0.1:9/other")
    assert plain.secrets == 0 and plain.timeout == timedelta(seconds=10)
    assert plain.backoff.factor == 2 and plain.rate == 0 and plain.headers == {}
    assert client.remove_webhook(tube) == plain
    with pytest.raises(delayq.NotFound):
        client.get_webhook(tube)
    with pytest.raises(delayq.NotFound):
        client.remove_webhook(tube)


def test_webhook_refusals(client: delayq.Client, tube: str) -> None:
    with pytest.raises(delayq.BadRequest):
        client.set_webhook(tube, "ftp://127.0.0.1/hook")
    with pytest.raises(delayq.BadRequest):
        client.set_webhook(tube, "http://127.0.0.1:9/", concurrency=0)
    with pytest.raises(TypeError):
        client.set_webhook(tube, "http://127.0.0.1:9/", secrets="one")


def test_a_job_url_and_content_type_with_a_webhook(client: delayq.Client, tube: str) -> None:
    client.set_webhook(tube, "http://127.0.0.1:9/hook")
    try:
        job = client.put(tube, "{}", delay="1h", url="http://127.0.0.1:9/own",
                         content_type="application/json")
        got = client.get_job(job.id)
        assert got.url == "http://127.0.0.1:9/own" and got.content_type == "application/json"
    finally:
        client.remove_webhook(tube)


# --- signatures on hand-made headers ----------------------------------------------------------


def test_a_good_signature_verifies() -> None:
    body, t = b'{"order":1}', now_ms()
    headers = {"Delayq-Signature": f"t={t},v1={sign('s1', t, body)}"}
    assert delayq.verify_signature("s1", headers, body)
    assert delayq.verify_signature(["s1"], {"delayq-signature": headers["Delayq-Signature"]}, body)
    assert delayq.verify_signature([b"s1"], list(headers.items()), body)
    assert delayq.verify_signature("s1", headers["Delayq-Signature"], body)
    assert delayq.signature_problem("s1", headers, body) is None
    # http.server's headers: an email.message.Message, with items() but not a Mapping.
    message = http.client.parse_headers(
        io.BytesIO(f"Delayq-Signature: {headers['Delayq-Signature']}\r\n\r\n".encode()))
    assert delayq.verify_signature("s1", message, body)


def test_a_wrong_secret_a_tampered_body_or_a_missing_part_fails() -> None:
    body, t = b'{"order":1}', now_ms()
    header = f"t={t},v1={sign('s1', t, body)}"
    assert not delayq.verify_signature("s2", {"Delayq-Signature": header}, body)
    assert not delayq.verify_signature("s1", {"Delayq-Signature": header}, b'{"order":2}')
    assert not delayq.verify_signature("s1", {}, body)
    assert not delayq.verify_signature("s1", f"v1={sign('s1', t, body)}", body)
    assert not delayq.verify_signature("s1", f"t=abc,v1={sign('s1', t, body)}", body)
    assert not delayq.verify_signature("s1", f"t={t}", body)
    # A t of thousands of digits is refused like any other bad t (int() of it raises).
    assert delayq.signature_problem("s1", "t=" + "9" * 5000 + ",v1=ab", body) == (
        "Delayq-Signature has no t=<unix ms>")
    assert "no v1 signature matches" in (delayq.signature_problem("s2", header, body) or "")
    with pytest.raises(ValueError):
        delayq.verify_signature([], header, body)


def test_either_of_two_secrets_verifies_while_rotating() -> None:
    body, t = b"x", now_ms()
    both = f"t={t},v1={sign('new', t, body)},v1={sign('old', t, body)}"
    old_only = f"t={t},v1={sign('old', t, body)}"
    assert delayq.verify_signature(["new", "old"], old_only, body)
    assert delayq.verify_signature(["new"], both, body)
    assert delayq.verify_signature(["old"], both, body)
    assert not delayq.verify_signature(["new"], old_only, body)
    assert not delayq.verify_signature(["other", "another"], both, body)


def test_a_stale_or_future_timestamp_fails() -> None:
    body, t = b"x", 1795629600123
    header = f"t={t},v1={sign('s', t, body)}"
    signed_at = datetime(2026, 11, 25, 18, 0, 0, 123000, tzinfo=timezone.utc)
    assert delayq.verify_signature("s", header, body, now=signed_at)
    assert delayq.verify_signature("s", header, body, now=signed_at + timedelta(minutes=4))
    assert not delayq.verify_signature("s", header, body, now=signed_at + timedelta(minutes=6))
    assert not delayq.verify_signature("s", header, body, now=signed_at - timedelta(minutes=6))
    assert delayq.verify_signature("s", header, body, now=signed_at + timedelta(minutes=6),
                                   tolerance=timedelta(minutes=10))
    assert "stale" in (delayq.signature_problem("s", header, body) or "")
    with pytest.raises(ValueError, match="naive"):
        delayq.verify_signature("s", header, body, now=datetime(2026, 11, 25, 18, 0))


# --- signatures of real deliveries ----------------------------------------------------------


def deliver(client: delayq.Client, tube: str, url: str, secrets: list[str], body: str) -> delayq.Job:
    client.set_webhook(tube, url, secrets=secrets, backoff_min="1s", max_attempts=5)
    return client.put(tube, body, content_type="application/json")


def test_delayqd_signs_with_both_secrets(client: delayq.Client, tube: str, recorder: Recorder) -> None:
    job = deliver(client, tube, recorder.url, ["new-secret", "old-secret"], '{"order":1}')
    try:
        headers, body = recorder.first()
        assert body == b'{"order":1}' and headers["Delayq-Job-Id"] == str(job.id)
        assert headers["Delayq-Signature"].count("v1=") == 2
        assert delayq.verify_signature(["new-secret"], headers, body)
        assert delayq.verify_signature(["old-secret"], headers, body)
        assert delayq.verify_signature(["retired", "old-secret"], headers, body)
        assert not delayq.verify_signature(["wrong"], headers, body)
        assert not delayq.verify_signature(["new-secret"], headers, body + b" ")
        later = datetime.now(timezone.utc) + timedelta(minutes=10)
        assert not delayq.verify_signature(["new-secret"], headers, body, now=later)
        wait_for(lambda: gone(client, job.id), what="the delivered job's delete")
    finally:
        client.remove_webhook(tube)


def echo_app(seen: list[tuple[bytes, bool]]) -> Callable[..., Any]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        seen.append((body, environ.get("delayq.signature_verified", False)))
        start_response("204 No Content", [])
        return []
    return app


def post(address: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        sent = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "host")}
        conn.request("POST", "/hook", body=body, headers=sent)
        answer = conn.getresponse()
        data = answer.read()
        return answer.status, (json.loads(data) if data else {})
    finally:
        conn.close()


def test_the_wsgi_verifier_passes_signed_deliveries_and_refuses_others(
        client: delayq.Client, tube: str, recorder: Recorder) -> None:
    seen: list[tuple[bytes, bool]] = []
    host = WsgiHost(delayq.WsgiVerifier(echo_app(seen), ["new-secret", "old-secret"]))
    wrong_tube = tube + "-wrong"
    try:
        good = deliver(client, tube, f"http://{host.address}/hook", ["old-secret"], '{"order":2}')
        wait_for(lambda: gone(client, good.id), what="the verified job's delete")
        assert seen == [(b'{"order":2}', True)]
        # Signed with a secret the receiver does not accept: 401, the job stays for a retry.
        bad = deliver(client, wrong_tube, f"http://{host.address}/hook", ["wrong"], "{}")
        refused = wait_for_job(client, bad.id, lambda job: job.last_status == 401,
                               "the 401 recorded on the job")
        assert refused.last_error == "HTTP 401" and len(seen) == 1
        # A real request replayed with a tampered body, and once it is stale.
        signed = deliver(client, tube, recorder.url, ["new-secret"], '{"order":3}')
        headers, body = recorder.first()
        wait_for(lambda: gone(client, signed.id), what="the recorded job's delete")
        assert post(host.address, headers, body) == (204, {})
        status, answer = post(host.address, headers, b'{"order":4}')
        assert status == 401 and answer["error"]["code"] == "bad_signature"
        assert post(host.address, {}, body)[0] == 401
        strict = WsgiHost(delayq.WsgiVerifier(echo_app(seen), "new-secret",
                                              tolerance=timedelta(milliseconds=100)))
        try:
            time.sleep(0.3)
            status, answer = post(strict.address, headers, body)
            assert status == 401 and "stale" in answer["error"]["message"]
        finally:
            strict.stop()
        assert [s for s in seen if s[0] == b'{"order":4}'] == []
    finally:
        client.remove_webhook(tube)
        client.remove_webhook(wrong_tube)
        host.stop()


def run_asgi(app: Callable[..., Any], headers: dict[str, str], body: bytes,
             scope_type: str = "http") -> list[dict[str, Any]]:
    """Calls an ASGI application with one request, its body in two messages; answers the
    messages it sent."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body[:3], "more_body": True},
                {"type": "http.request", "body": body[3:], "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": scope_type, "method": "POST", "path": "/hook",
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    return sent


def test_the_asgi_verifier_passes_signed_deliveries_and_refuses_others(
        client: delayq.Client, tube: str, recorder: Recorder) -> None:
    job = deliver(client, tube, recorder.url, ["new-secret", "old-secret"], '{"order":5}')
    try:
        headers, body = recorder.first()
        wait_for(lambda: gone(client, job.id), what="the recorded job's delete")
    finally:
        client.remove_webhook(tube)
    seen: list[tuple[bytes, bool]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append((message["body"], scope.get("delayq.signature_verified", False)))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent = run_asgi(delayq.AsgiVerifier(inner, ["old-secret"]), headers, body)
    assert sent[0]["status"] == 204 and seen == [(b'{"order":5}', True)]
    for app, request_body in [
        (delayq.AsgiVerifier(inner, "wrong"), body),
        (delayq.AsgiVerifier(inner, "new-secret"), body + b"!"),
    ]:
        sent = run_asgi(app, headers, request_body)
        assert sent[0]["status"] == 401
        assert json.loads(sent[1]["body"])["error"]["code"] == "bad_signature"
    time.sleep(0.3)
    sent = run_asgi(delayq.AsgiVerifier(inner, "new-secret", tolerance=timedelta(milliseconds=100)),
                       headers, body)
    assert sent[0]["status"] == 401 and b"stale" in sent[1]["body"]
    assert len(seen) == 1
    passed: list[str] = []

    async def lifespan(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["type"])

    run_asgi(delayq.AsgiVerifier(lifespan, "s"), {}, b"", scope_type="lifespan")
    assert passed == ["lifespan"]
