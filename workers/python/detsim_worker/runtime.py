# The worker runtime (workers/runtime.ts): one request message in, exactly one reply out. Owns
# Worker.Hello / Status / Acknowledge / Shutdown, session binding, the Hello-first gate per stream,
# the lifecycle reply cache (with the payloads of held captures) and the mapping of refusals to
# error replies; dispatches State.WritePayload to capture_file.py, State.PrefetchPayload to
# restore_prefetch.py and the rest to the agent or environment host. Not the transport (server.py)
# nor the process (__main__.py).
from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import protocol as P
from .agent_host import AgentHost
from .canonical_json import canonical_bytes, canonical_digest, parse_strict, sha256_hex
from .capture_file import capture_hold_of, without_hold, write_held_payload
from .environment_host import EnvironmentHost
from .op_cache import LifecycleCache
from .protocol import ProtocolRefusal, Request, read_request
from .restore_prefetch import PrefetchedPayloads
from .scalars import MISSING, InputError, is_int, read_digest, read_id, read_request_id, refuse_unknown_fields

LIFECYCLE = {P.AGENT_INITIALIZE, P.ENV_INITIALIZE, P.CAPTURE, P.STAGE_RESTORE, P.ACTIVATE_RESTORE}
# Calls that may change a participant's live state: a held capture refuses its write once any of
# these was served after it (the digest it gives would be of a state past the boundary).
STATE_CHANGING = {
    P.AGENT_INITIALIZE,
    P.ENV_INITIALIZE,
    P.AGENT_PREPARE,
    P.AGENT_COMMIT,
    P.ENV_ADVANCE,
    P.ACTIVATE_RESTORE,
}
MAX_AGENTS_PER_WORKER = 64
RUNTIME_NAME = f'detsim-py/{platform.python_version()}'


def contract_digest() -> str:
    """SHA-256 of worker.proto's bytes (a byte copy ships in the package; test_protocol checks it)."""
    return sha256_hex(resources.files('detsim_worker._generated').joinpath('worker.proto').read_bytes())


CONTRACT_DIGEST = contract_digest()
BUILD_DIGEST = canonical_digest(
    {'implementation': 'detsim-py-worker', 'version': '0.1.0', 'contractDigest': CONTRACT_DIGEST}
)
CAPABILITIES = {'agent': 'agent-step-v1', 'environment': 'world-step-v1'}


@dataclass
class StreamState:
    introduced: bool = False


@dataclass
class Outcome:
    body: bytes
    attachment: bytes | None = None
    stop: bool = False


class WorkerRuntime:
    def __init__(
        self,
        role: str,
        worker_id: str,
        session_id: str | None = None,
        strict: bool = False,
        max_message_bytes: int = P.DEFAULT_MAX_MESSAGE_BYTES,
        models: list[str] | None = None,
        store_dir: str | None = None,
        incarnation_id: str | None = None,
    ) -> None:
        self.role = role
        self.worker_id = worker_id
        self.bound_session = session_id
        self.strict_user_models = strict
        self.launched_models = list(models or [])
        self.store_dir = store_dir
        self.max_message_bytes = max_message_bytes
        self.incarnation_id = incarnation_id or f'inc-{os.urandom(8).hex()}'
        self.progress_counter = 0
        # State-changing calls served so far (STATE_CHANGING): a held capture notes the count it saw.
        self.state_changes = 0
        self.last_completed_request_id: str | None = None
        self.stopping = False
        self.lifecycle = LifecycleCache()
        # The restore prefetch (store-files-v1): payloads read and hashed while the coordinator verifies their file.
        self.prefetched = PrefetchedPayloads()
        self.agents = AgentHost(self) if role == 'agent' else None
        self.environment = EnvironmentHost(self) if role == 'environment' else None

    @property
    def session_id(self) -> str:
        return self.bound_session or ''

    def progress(self, request_id: str) -> None:
        self.progress_counter += 1
        self.last_completed_request_id = request_id

    def handle(self, body: bytes, attachment: bytes | None, stream: StreamState) -> Outcome:
        try:
            req = read_request(parse_strict(body))
        except ValueError as e:
            return Outcome(
                self._error_envelope(
                    salvage_request_id(body),
                    None,
                    {'code': 'INVALID_ARGUMENT', 'message': f'malformed request: {e}', 'mutation': 'none'},
                )
            )
        try:
            reply = self._dispatch(req, attachment, stream)
            out = Outcome(self._result_envelope(req, reply['result']), reply.get('attachment'))
            out.stop = req.method == P.SHUTDOWN
            return out
        except Exception as e:  # every failure becomes an in-band error reply, never a gRPC error
            return Outcome(self._error_envelope(req.request_id, req.scope, to_error_body(e)))

    def _dispatch(self, req: Request, attachment: bytes | None, stream: StreamState) -> dict:
        if req.method == P.HELLO:
            reply = self._hello(req)
            stream.introduced = True
            return reply
        if not stream.introduced:
            raise ProtocolRefusal('INVALID_PHASE', f'{req.method} before Worker.Hello')
        if req.method in STATE_CHANGING:
            self.state_changes += 1
        if req.method == P.STATUS:
            return self._status(req)
        if req.method == P.SHUTDOWN:
            return self._shutdown(req)
        if req.method == P.ACKNOWLEDGE:
            return self._acknowledge(req)
        if self.stopping:
            raise ProtocolRefusal('INVALID_PHASE', 'the worker is stopping')
        if req.method not in LIFECYCLE:
            return self._route(req, attachment)
        digest = canonical_digest({'method': req.method, 'scope': req.scope, 'params': req.params})
        hold_from = capture_hold_of(req, self.store_dir) if req.method == P.CAPTURE else None
        cached = self.lifecycle.get(req.request_id)
        if cached:
            if cached['digest'] != digest:
                raise ProtocolRefusal(
                    'CONFLICT', f'{req.request_id} was already used for a different {req.method} request'
                )
            return cached
        if self.lifecycle.full:
            raise ProtocolRefusal(
                'BUSY', f'{LifecycleCache.LIMIT} lifecycle replies await Worker.Acknowledge; acknowledge them first'
            )
        if hold_from is None:
            reply = self._route(req, attachment)
        else:  # hold (store-files-v1): a payload of at least hold_from bytes stays in the cache until
            # Worker.Acknowledge, never sent; a shorter one is replied and cached like any unheld capture
            host: Any = self.agents if self.agents is not None else self.environment
            reply = host.capture(without_hold(req), hold_from=hold_from)
        # A held capture's write is refused once the count of state-changing calls has moved.
        seen = {'state_changes': self.state_changes} if 'held' in reply else {}
        self.lifecycle.put(req.request_id, {'digest': digest, **reply, **seen})
        return reply

    def _route(self, req: Request, attachment: bytes | None) -> dict:
        a, env = self.agents, self.environment
        m = req.method
        if m in (P.AGENT_INITIALIZE, P.AGENT_PREPARE, P.AGENT_COMMIT):
            if a is None:
                raise ProtocolRefusal('UNSUPPORTED', f'{m}: this worker hosts the environment')
            return {P.AGENT_INITIALIZE: a.initialize, P.AGENT_PREPARE: a.prepare, P.AGENT_COMMIT: a.commit}[m](req)
        if m in (P.ENV_INITIALIZE, P.ENV_ADVANCE):
            if env is None:
                raise ProtocolRefusal('UNSUPPORTED', f'{m}: this worker hosts agents')
            return env.initialize(req) if m == P.ENV_INITIALIZE else env.advance(req)
        host: Any = a if a is not None else env
        if m == P.CAPTURE:
            return host.capture(req)
        if m == P.STAGE_RESTORE:
            return host.stage_restore(req, attachment)
        if m == P.ACTIVATE_RESTORE:
            return host.activate_restore(req)
        if m == P.PREFETCH_PAYLOAD:
            return self.prefetched.prefetch(req.params, self.store_dir)
        if m == P.WRITE_PAYLOAD:
            return write_held_payload(req, self.lifecycle, self.store_dir, self.state_changes)
        raise ProtocolRefusal('UNSUPPORTED', f'unknown method {_js(m)}')

    # ---- Worker.* -------------------------------------------------------------------------------

    def _hello(self, req: Request) -> dict:
        if req.scope is not None:
            raise ProtocolRefusal('INVALID_ARGUMENT', 'Worker.Hello takes scope null')
        p = req.params
        try:
            refuse_unknown_fields(
                p, ['sessionId', 'expectedWorkerId', 'role', 'supportedMajors', 'contractDigest'], 'params'
            )
            session_id = read_id(p.get('sessionId', MISSING), 'params.sessionId')
            expected = read_id(p.get('expectedWorkerId', MISSING), 'params.expectedWorkerId')
            digest = read_digest(p.get('contractDigest', MISSING), 'params.contractDigest')
        except InputError as e:
            raise P.as_invalid(e) from None
        majors = p.get('supportedMajors')
        if not isinstance(majors, list) or not all(is_int(m) for m in majors):
            raise ProtocolRefusal('INVALID_ARGUMENT', 'params.supportedMajors must be a list of integers')
        if digest != CONTRACT_DIGEST:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH', f'contractDigest: the caller has {digest}, this worker speaks {CONTRACT_DIGEST}'
            )
        if expected != self.worker_id:
            raise ProtocolRefusal('IDENTITY_MISMATCH', 'workerId: params.expectedWorkerId does not name this worker')
        role = p.get('role', MISSING)
        if role not in ('agent', 'environment'):
            raise ProtocolRefusal(
                'UNSUPPORTED', f'role: {"undefined" if role is MISSING else _js(role)} is not a worker role'
            )
        if role != self.role:
            raise ProtocolRefusal('UNSUPPORTED', f'role: the caller asks for {role}, this worker runs as {self.role}')
        if P.PROTOCOL_MAJOR not in majors:
            raise ProtocolRefusal('UNSUPPORTED', f'supportedMajors: {_js(majors)} does not include {P.PROTOCOL_MAJOR}')
        if self.bound_session is not None and self.bound_session != session_id:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH', 'sessionId: params.sessionId is not the session this worker is bound to'
            )
        self.bound_session = session_id
        return {
            'result': {
                'selectedMajor': P.PROTOCOL_MAJOR,
                'selectedMinor': P.PROTOCOL_MINOR,
                'workerId': self.worker_id,
                'incarnationId': self.incarnation_id,
                'role': self.role,
                'runtime': RUNTIME_NAME,
                'buildDigest': BUILD_DIGEST,
                'contractDigest': CONTRACT_DIGEST,
                'capabilities': sorted([CAPABILITIES[self.role], 'checkpoint-v1', *self._store_capabilities()]),
                'limits': {
                    'maxAgents': MAX_AGENTS_PER_WORKER if self.role == 'agent' else 0,
                    'maxMessageBytes': self.max_message_bytes,
                    'workerThreads': 1,
                },
            }
        }

    def _store_capabilities(self) -> list[str]:
        """store-files-v1: only a worker given the run's store reads, writes and prefetches payload files
        in it (one without streams its capture and restore payloads as attachments); with it,
        capture-hold-from-v1 (a held Capture may name the size from which it holds, `holdFrom`)."""
        return [] if self.store_dir is None else ['store-files-v1', 'capture-hold-from-v1']

    def _status(self, req: Request) -> dict:
        try:
            refuse_unknown_fields(req.params, [], 'params')
        except InputError as e:
            raise P.as_invalid(e) from None
        host: Any = self.agents if self.agents is not None else self.environment
        epoch, boundary = host.current_epoch, host.boundary
        current = (
            {'epoch': epoch, 'sessionId': self.bound_session, 'step': str(boundary)}
            if self.bound_session and epoch is not None and boundary is not None
            else None
        )
        return {
            'result': {
                'state': 'stopping' if self.stopping else host.state,
                'currentScope': current,
                'lastCompletedRequestId': self.last_completed_request_id,
                'progressCounter': str(self.progress_counter),
            }
        }

    def _acknowledge(self, req: Request) -> dict:
        ids = req.params.get('requestIds')
        try:
            refuse_unknown_fields(req.params, ['requestIds'], 'params')
            if not isinstance(ids, list) or len(ids) < 1 or len(ids) > 16:
                raise ProtocolRefusal('INVALID_ARGUMENT', 'params.requestIds must hold 1..16 request ids')
            for i, rid in enumerate(ids):
                read_request_id(rid, f'params.requestIds[{i}]')
        except InputError as e:
            raise P.as_invalid(e) from None
        return {'result': {'acknowledged': self.lifecycle.acknowledge(ids)}}

    def _shutdown(self, req: Request) -> dict:
        try:
            refuse_unknown_fields(req.params, ['reason'], 'params')
            read_id(req.params.get('reason', MISSING), 'params.reason')
        except InputError as e:
            raise P.as_invalid(e) from None
        self.stopping = True
        return {'result': {'stopping': True}}

    # ---- envelopes ------------------------------------------------------------------------------

    def _result_envelope(self, req: Request, result: dict) -> bytes:
        return canonical_bytes(
            {
                'incarnationId': self.incarnation_id,
                'requestId': req.request_id,
                'result': result,
                'scope': req.scope,
                'type': 'result',
                'workerId': self.worker_id,
            }
        )

    def _error_envelope(self, request_id: str, scope: dict | None, error: dict) -> bytes:
        return canonical_bytes(
            {
                'type': 'error',
                'requestId': request_id,
                'workerId': self.worker_id,
                'incarnationId': self.incarnation_id,
                'scope': scope,
                # A message may quote a model's value: a lone surrogate in it is shown as U+FFFD, or the
                # reply itself could not be printed and the request would go without its one reply.
                'error': {**error, 'message': _well_formed(str(error.get('message', '')))},
            }
        )


def _well_formed(text: str) -> str:
    return ''.join('\ufffd' if '\ud800' <= c <= '\udfff' else c for c in text)


def _js(value: Any) -> str:
    from .canonical_json import js_stringify

    return js_stringify(value)


def to_error_body(e: Exception) -> dict:
    if isinstance(e, ProtocolRefusal):
        return e.body()
    if isinstance(e, InputError):
        return {'code': 'INVALID_ARGUMENT', 'message': str(e), 'mutation': 'none'}
    return {'code': 'INTERNAL', 'message': f'internal error: {e}', 'mutation': 'unknown'}


_REQUEST_ID = re.compile(rb'"requestId":"(req-(?:0|[1-9][0-9]{0,19}))"')


def salvage_request_id(body: bytes) -> str:
    m = _REQUEST_ID.search(body[:4096])
    if m:
        try:
            return read_request_id(m.group(1).decode(), 'requestId')
        except InputError:
            pass
    return 'req-0'
