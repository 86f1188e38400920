"""Stand-in of opentelemetry.context: immutable Contexts, the current one in a ContextVar."""

from __future__ import annotations

import uuid
from contextvars import ContextVar, Token


class Context(dict[str, object]):
    """As the real one: a dict that cannot be changed in place."""

    def __setitem__(self, key: str, value: object) -> None:
        raise ValueError


_CURRENT: ContextVar[Context] = ContextVar("current_context", default=Context())


def create_key(keyname: str) -> str:
    return f"{keyname}-{uuid.uuid4()}"


def get_value(key: str, context: Context | None = None) -> object:
    return (context if context is not None else get_current()).get(key)


def set_value(key: str, value: object, context: Context | None = None) -> Context:
    new_values = (context if context is not None else get_current()).copy()
    new_values[key] = value
    return Context(new_values)


def get_current() -> Context:
    return _CURRENT.get()


def attach(context: Context) -> Token[Context]:
    return _CURRENT.set(context)


def detach(token: Token[Context]) -> None:
    _CURRENT.reset(token)
