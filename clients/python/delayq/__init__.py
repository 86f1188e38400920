"""delayq — the Python client of delayq's HTTP/JSON API (standard library only).

    client = delayq.Client("http://127.0.0.1:8080")
    job = client.put("emails", "hello", delay=timedelta(minutes=10), key="welcome:42")
    client.work("emails", handler, concurrency=4)

Client (client.py) has a method per route; its answers are the dataclasses of models.py; its
errors the classes of errors.py, all under DelayqError. Worker (worker.py) runs handlers on
reserved jobs. verify_signature, WsgiVerifier and AsgiVerifier (webhooks.py) check the
signatures of push deliveries. With OpenTelemetry installed, puts carry the current span's
trace context and Worker runs each handler in a span continuing the job's (tracing.py).
README.md has examples.
"""

from ._version import __version__
from .client import KEEP, Body, Client, Keep, PutJob
from .errors import (
    BadRequest,
    Conflict,
    DelayqError,
    Draining,
    Forbidden,
    HeadersTooLarge,
    Internal,
    Limit,
    MethodNotAllowed,
    NoRoute,
    NoSpace,
    NotFound,
    ServiceUnavailable,
    Starting,
    Stopping,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
    Unsupported,
)
from .models import (
    Backoff,
    Backup,
    Counters,
    DueBucket,
    DueCounts,
    FireLateness,
    FlowSettings,
    Health,
    Job,
    JobList,
    LatenessBucket,
    Schedule,
    SchedulePage,
    ScheduleRun,
    Stats,
    TubeStats,
    Webhook,
)
from .times import Duration
from .webhooks import AsgiVerifier, WsgiVerifier, signature_problem, verify_signature
from .worker import Worker

__all__ = [
    "__version__",
    "KEEP",
    "AsgiVerifier",
    "Backoff",
    "Backup",
    "BadRequest",
    "Body",
    "Client",
    "Conflict",
    "Counters",
    "DelayqError",
    "Draining",
    "DueBucket",
    "DueCounts",
    "Duration",
    "FireLateness",
    "FlowSettings",
    "Forbidden",
    "HeadersTooLarge",
    "Health",
    "Internal",
    "Job",
    "JobList",
    "Keep",
    "LatenessBucket",
    "Limit",
    "MethodNotAllowed",
    "NoRoute",
    "NoSpace",
    "NotFound",
    "PutJob",
    "Schedule",
    "SchedulePage",
    "ScheduleRun",
    "ServiceUnavailable",
    "Starting",
    "Stats",
    "Stopping",
    "TooLarge",
    "TransportError",
    "TubeStats",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
    "Unsupported",
    "Webhook",
    "Worker",
    "WsgiVerifier",
    "signature_problem",
    "verify_signature",
]
