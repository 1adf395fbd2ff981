# The worker protocol's envelopes in Python (core/protocol/envelope.ts): method names, error codes
# and the before-mutation rule, ProtocolRefusal, and the request reader. Not the transport.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .scalars import MISSING, InputError, read_object, read_request_id, read_scope, refuse_unknown_fields

HELLO = 'Worker.Hello'
STATUS = 'Worker.Status'
ACKNOWLEDGE = 'Worker.Acknowledge'
SHUTDOWN = 'Worker.Shutdown'
ENV_INITIALIZE = 'Environment.Initialize'
ENV_ADVANCE = 'Environment.Advance'
AGENT_INITIALIZE = 'Agent.Initialize'
AGENT_PREPARE = 'Agent.Prepare'
AGENT_COMMIT = 'Agent.Commit'
CAPTURE = 'State.Capture'
STAGE_RESTORE = 'State.StageRestore'
ACTIVATE_RESTORE = 'State.ActivateRestore'
WRITE_PAYLOAD = 'State.WritePayload'
PREFETCH_PAYLOAD = 'State.PrefetchPayload'

MAY_MUTATE = frozenset({'RESULT_EXPIRED', 'BACKEND_FAILURE', 'INTERNAL'})
DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
MAX_CHUNK_BYTES = 1024 * 1024
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 0


class ProtocolRefusal(Exception):
    """A refusal raised inside the worker and turned into an error reply by the runtime."""

    def __init__(self, code: str, message: str, mutation: str = 'none') -> None:
        super().__init__(message)
        if code not in MAY_MUTATE and mutation != 'none':
            raise AssertionError(f'{code} must carry mutation "none"')
        self.code = code
        self.message = message
        self.mutation = mutation

    def body(self) -> dict:
        return {'code': self.code, 'message': self.message, 'mutation': self.mutation}


@dataclass
class Request:
    method: str
    request_id: str
    scope: dict | None
    params: dict


def _require(obj: dict, key: str, field: str) -> Any:
    if key not in obj:
        raise InputError('struct_missing_field', f'{field}.{key} is missing')
    return obj[key]


def read_request(value: Any, field: str = 'request') -> Request:
    obj = read_object(value, field)
    refuse_unknown_fields(obj, ['method', 'requestId', 'scope', 'params'], field)
    method = _require(obj, 'method', field)
    if not isinstance(method, str) or len(method) == 0 or len(method) > 64:
        raise InputError('struct_invalid_field', f'{field}.method must be a method name')
    request_id = read_request_id(_require(obj, 'requestId', field), f'{field}.requestId')
    scope_raw = _require(obj, 'scope', field)
    scope = None if scope_raw is None else read_scope(scope_raw, f'{field}.scope')
    params = read_object(_require(obj, 'params', field), f'{field}.params')
    return Request(method, request_id, scope, params)


def as_invalid(e: Exception) -> Exception:
    """A refused input as INVALID_ARGUMENT; anything else unchanged."""
    return ProtocolRefusal('INVALID_ARGUMENT', str(e)) if isinstance(e, InputError) else e


__all__ = ['MISSING', 'ProtocolRefusal', 'Request', 'read_request', 'as_invalid']
