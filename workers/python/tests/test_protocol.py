# The Python worker process over real gRPC (a Unix socket): the ready line, Hello-first, Hello
# refusals, idempotency (same key + body: the cached reply; a different body: CONFLICT), epochs and
# steps, capture -> restore into a fresh worker, store-files-v1 confinement, held captures (`hold`,
# and `holdFrom` of capture-hold-from-v1), flag refusals, an unsafe integer literal in a request
# body, the contract digest. The message-for-message comparison with the TypeScript worker is
# vitest's (test/cross-lang/worker-protocol.test.ts); this suite runs without Node.
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import pytest
from detsim_worker._generated import worker_pb2, worker_pb2_grpc
from detsim_worker.canonical_json import canonical_bytes, parse_strict, sha256_hex
from detsim_worker.runtime import CONTRACT_DIGEST

REPO_ROOT = Path(__file__).resolve().parents[3]
SESSION = 's-1'
STEP = {'numerator': '50000000', 'denominator': '3'}


class Worker:
    """A worker process on a Unix socket and one Session stream to it."""

    def __init__(self, role='agent', worker_id='w-1', extra=(), cwd=None, stderr=None):
        self.dir = tempfile.mkdtemp(prefix='dpw-')
        self.proc = subprocess.Popen(
            [
                sys.executable,
                '-m',
                'detsim_worker',
                '--listen',
                f'unix:{self.dir}/w.sock',
                '--role',
                role,
                '--worker-id',
                worker_id,
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
            stderr=stderr,
        )
        self.ready = json.loads(self.proc.stdout.readline())
        self.channel = grpc.insecure_channel(self.ready['listen'])
        self.next_id = 0
        self.stream = self.open_stream()

    def open_stream(self, timeout=None):
        import queue

        requests = queue.Queue()

        def frames():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield from item

        # A plaintext TCP worker's run secret, when it holds one, goes with every stream.
        metadata = [('authorization', f'Bearer {self.token}')] if getattr(self, 'token', None) else None
        replies = worker_pb2_grpc.WorkerStub(self.channel).Session(frames(), timeout=timeout, metadata=metadata)
        return requests, replies

    def call(self, method, scope, params, attachment=None, request_id=None, stream=None):
        requests, replies = stream or self.stream
        if request_id is None:
            self.next_id += 1
            request_id = f'req-{self.next_id}'
        body = canonical_bytes({'method': method, 'requestId': request_id, 'scope': scope, 'params': params})
        frames = [worker_pb2.Frame(chunk=attachment)] if attachment else []
        requests.put(frames + [worker_pb2.Frame(body=body)])
        chunks = []
        for frame in replies:
            if frame.chunk:
                chunks.append(frame.chunk)
                continue
            reply = parse_strict(frame.body)
            return reply, (b''.join(chunks) if chunks else None)
        raise EOFError('stream ended')

    def call_raw(self, body):
        """Send `body` bytes as they are (no canonicalizing) and return the parsed reply."""
        requests, replies = self.stream
        requests.put([worker_pb2.Frame(body=body)])
        return parse_strict(next(replies).body)

    def hello(self, role='agent', worker_id='w-1'):
        return self.call(
            'Worker.Hello',
            None,
            {
                'sessionId': SESSION,
                'expectedWorkerId': worker_id,
                'role': role,
                'supportedMajors': [1],
                'contractDigest': CONTRACT_DIGEST,
            },
        )[0]

    def stop(self):
        self.stream[0].put(None)
        self.channel.close()
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


def sc(step, epoch='e1'):
    return {'sessionId': SESSION, 'epoch': epoch, 'step': str(step)}


AGENTS = [
    {
        'agentId': 'a-walk',
        'model': 'walker',
        'params': {'explore': 3},
        'seed': 4242,
        'stepDuration': STEP,
        'observation': {},
    },
    {
        'agentId': 'a-lif',
        'model': 'lif',
        'params': {'neurons': 16},
        'seed': -9,
        'stepDuration': STEP,
        'observation': {},
    },
]
IDS = [{'agentId': a['agentId']} for a in AGENTS]


def forage_init(ports):
    """Environment.Initialize params of a small built-in forage world on `ports`."""
    return {
        'environmentId': 'forage',
        'model': 'forage',
        'params': {'width': 5, 'height': 4, 'food': 3},
        'seed': 7,
        'stepDuration': STEP,
        'ports': ports,
    }


def code(reply):
    return 'ok' if reply['type'] == 'result' else reply['error']['code']


@pytest.fixture()
def worker():
    w = Worker(extra=['--store-dir', tempfile.gettempdir()])
    yield w
    if w.proc.poll() is None:
        w.stop()


def test_the_packaged_proto_is_the_repository_contract():
    assert CONTRACT_DIGEST == sha256_hex((REPO_ROOT / 'proto' / 'detsim' / 'v1' / 'worker.proto').read_bytes())


def test_ready_line_hello_first_and_hello_refusals(worker):
    assert list(worker.ready) == ['ready', 'listen', 'pid'] and worker.ready['pid'] == worker.proc.pid
    reply, _ = worker.call('Worker.Status', None, {})
    assert reply['error'] == {
        'code': 'INVALID_PHASE',
        'message': 'Worker.Status before Worker.Hello',
        'mutation': 'none',
    }
    assert code(worker.hello(worker_id='w-2')) == 'IDENTITY_MISMATCH'
    assert code(worker.hello(role='environment')) == 'UNSUPPORTED'
    hello = worker.hello()
    assert hello['result']['runtime'].startswith('detsim-py/')
    # store-files-v1 and capture-hold-from-v1 come with --store-dir (the fixture's); a worker without a
    # store offers neither.
    assert hello['result']['capabilities'] == [
        'agent-step-v1',
        'capture-hold-from-v1',
        'checkpoint-v1',
        'store-files-v1',
    ]
    # Hello-first is per stream: a second stream is served nothing until its own Hello.
    other = worker.open_stream()
    assert code(worker.call('Worker.Status', None, {}, stream=other)[0]) == 'INVALID_PHASE'
    other[0].put(None)


def test_a_request_body_with_an_unsafe_integer_is_refused_as_typescript_refuses_it(worker):
    # The TypeScript and Rust workers' words (core/formats/canonical-json.ts), offset included.
    worker.hello()
    body = b'{"method":"Worker.Status","params":{"n":9007199254740992},"requestId":"req-70","scope":null}'
    reply = worker.call_raw(body)
    assert reply['requestId'] == 'req-70'
    assert reply['error'] == {
        'code': 'INVALID_ARGUMENT',
        'mutation': 'none',
        'message': (
            'malformed request: integer 9007199254740992 is beyond ±(2^53−1); write counters as U64 strings at '
            'offset 40'
        ),
    }


def test_steps_idempotency_epochs_and_conflicts(worker):
    worker.hello()
    assert code(worker.call('Agent.Initialize', sc(0), {'agents': AGENTS})[0]) == 'ok'
    prep, _ = worker.call('Agent.Prepare', sc(0), {'agents': IDS})
    assert code(prep) == 'ok'
    again, _ = worker.call('Agent.Prepare', sc(0), {'agents': IDS}, request_id=prep['requestId'])
    assert again == prep
    assert code(worker.call('Agent.Prepare', sc(0, 'e0'), {'agents': IDS})[0]) == 'STALE_EPOCH'
    assert code(worker.call('Agent.Prepare', sc(3), {'agents': IDS})[0]) == 'FUTURE_STEP'
    commit = {
        'agents': [
            {
                'agentId': a['agentId'],
                'preparedRequestId': prep['requestId'],
                'observation': {'foodDx': 1, 'foodDy': 0},
                'rewards': [],
            }
            for a in IDS
        ]
    }
    assert code(worker.call('Agent.Commit', sc(0), commit)[0]) == 'ok'
    assert code(worker.call('Agent.Commit', sc(0), commit)[0]) == 'ok'
    commit['agents'][0]['observation'] = {'foodDx': 2}
    assert code(worker.call('Agent.Commit', sc(0), commit)[0]) == 'CONFLICT'
    # A lifecycle request id reused for a different body is CONFLICT too.
    assert (
        code(
            worker.call('State.Capture', sc(1), {'checkpointId': 'ck-1', 'agentId': 'a-walk'}, request_id='req-900')[0]
        )
        == 'ok'
    )
    assert (
        code(
            worker.call('State.Capture', sc(1), {'checkpointId': 'ck-2', 'agentId': 'a-walk'}, request_id='req-900')[0]
        )
        == 'CONFLICT'
    )


def test_capture_restores_into_a_fresh_worker_and_continues_identically(worker):
    worker.hello()
    worker.call('Agent.Initialize', sc(0), {'agents': AGENTS})
    for k in range(3):
        p, _ = worker.call('Agent.Prepare', sc(k), {'agents': IDS})
        worker.call(
            'Agent.Commit',
            sc(k),
            {
                'agents': [
                    {
                        'agentId': a['agentId'],
                        'preparedRequestId': p['requestId'],
                        'observation': {'foodDx': k, 'foodDy': -1},
                        'rewards': [],
                    }
                    for a in IDS
                ]
            },
        )
    fresh = Worker(worker_id='w-2')
    try:
        fresh.hello(worker_id='w-2')
        for agent in IDS:
            cap, data = worker.call('State.Capture', sc(3), {'checkpointId': 'ck-3', **agent})
            result = cap['result']
            stage = {
                'checkpointId': 'ck-3',
                **agent,
                'sourceScope': sc(3),
                'compatibilityDigest': result['compatibilityDigest'],
                'payload': result['payload'],
            }
            bad = dict(stage, payload=dict(result['payload'], byteLength=str(len(data) + 1)))
            assert code(fresh.call('State.StageRestore', sc(3, 'e2'), bad, attachment=data)[0]) == 'BUFFER_INVALID'
            staged, _ = fresh.call('State.StageRestore', sc(3, 'e2'), stage, attachment=data)
            token = staged['result']['restoreToken']
            assert code(fresh.call('State.ActivateRestore', sc(3, 'e2'), {'restoreToken': token, **agent})[0]) == 'ok'
        # store-files-v1: the fresh worker has no --store-dir and reads no files.
        refused, _ = fresh.call(
            'State.StageRestore',
            sc(3, 'e3'),
            dict(stage, payload=dict(result['payload'], file={'path': '/etc/passwd', 'offset': '0'})),
        )
        assert refused['error']['code'] == 'UNSUPPORTED'
        worker.call('Worker.Shutdown', None, {'reason': 'done'})
        decisions = []
        for w, epoch in ((fresh, 'e2'),):
            p, _ = w.call('Agent.Prepare', sc(3, epoch), {'agents': IDS})
            decisions.append([a['decision'] for a in p['result']['agents']])
        assert all(isinstance(d, dict) for d in decisions[0])
    finally:
        fresh.stop()


def test_payload_file_outside_the_store_is_refused_alike(worker):
    worker.hello()
    worker.call('Agent.Initialize', sc(0), {'agents': AGENTS})
    stage = {
        'checkpointId': 'ck-x',
        'agentId': 'a-walk',
        'sourceScope': sc(0),
        'compatibilityDigest': 'a' * 64,
        'payload': {'digest': 'b' * 64, 'byteLength': '4', 'file': {'path': '/etc/passwd', 'offset': '0'}},
    }
    reply, _ = worker.call('State.StageRestore', sc(0, 'e2'), stage)
    assert reply['error'] == {
        'code': 'INVALID_ARGUMENT',
        'message': "params.payload.file.path is not a regular file inside this worker's store directory",
        'mutation': 'none',
    }


def _step(w, k):
    p, _ = w.call('Agent.Prepare', sc(k), {'agents': IDS})
    w.call(
        'Agent.Commit',
        sc(k),
        {
            'agents': [
                {
                    'agentId': a['agentId'],
                    'preparedRequestId': p['requestId'],
                    'observation': {'foodDx': k, 'foodDy': 1},
                    'rewards': [],
                }
                for a in IDS
            ]
        },
    )


@pytest.fixture()
def stepped():
    """A worker with a store of its own, introduced, its agents initialized and stepped once: (worker, store)."""
    store = tempfile.mkdtemp(prefix='dpw-store-')
    w = Worker(extra=['--store-dir', store])
    try:
        w.hello()
        w.call('Agent.Initialize', sc(0), {'agents': AGENTS})
        _step(w, 0)
        yield w, store
    finally:
        w.stop()


def test_a_held_capture_is_written_into_a_checkpoint_temp_file_and_hashed_as_it_is_written(stepped):
    import hashlib

    w, store = stepped
    ref = {'checkpointId': 'ck-1', 'agentId': 'a-lif'}
    streamed, data = w.call('State.Capture', sc(1), ref)
    held, none = w.call('State.Capture', sc(1), {**ref, 'hold': True})
    assert none is None and data
    # The streamed reply's fields, but the payload's size alone: the write gives the digest.
    assert held['result'] == {**streamed['result'], 'payload': {'byteLength': str(len(data))}}
    # A replay of a held capture also carries no attachment.
    assert w.call('State.Capture', sc(1), {**ref, 'hold': True}, request_id=held['requestId']) == (held, None)
    tmp = os.path.join(store, 'tmp-ck-1.flysess')
    with open(tmp, 'wb') as f:
        f.write(bytes(2 * len(data) + 16))

    def write(capture, path=tmp, offset='8'):
        return w.call(
            'State.WritePayload',
            None,
            {'captureRequestId': capture['requestId'], 'file': {'path': path, 'offset': offset}},
        )[0]

    wrote = {'byteLength': str(len(data)), 'digest': hashlib.sha256(data).hexdigest()}
    assert write(held)['result'] == wrote
    # Not a lifecycle call: the same bytes may be written again, elsewhere.
    assert write(held, offset=str(8 + len(data)))['result'] == wrote
    with open(tmp, 'rb') as f:
        assert f.read() == bytes(8) + data + data + bytes(8)
    # Only a checkpoint temporary inside the store is writable, with one text for every other path.
    outside = tempfile.mkdtemp(prefix='dpw-out-')
    victim = os.path.join(outside, 'tmp-ck-9.flysess')
    with open(victim, 'wb') as f:
        f.write(b'keep')
    os.symlink(victim, os.path.join(store, 'tmp-ck-8.flysess'))
    with open(os.path.join(store, 'ck-1.flysess'), 'wb') as f:
        f.write(bytes(len(data)))
    os.symlink(os.path.join(store, 'ck-1.flysess'), os.path.join(store, 'tmp-ck-7.flysess'))
    not_temp = {
        'code': 'INVALID_ARGUMENT',
        'mutation': 'none',
        'message': (
            "params.file.path is not a checkpoint temporary file (tmp-<checkpointId>.flysess) inside this worker's "
            'store directory'
        ),
    }
    for path in (
        os.path.join(store, 'ck-1.flysess'),
        victim,
        os.path.join(store, 'tmp-ck-8.flysess'),
        os.path.join(store, 'tmp-ck-7.flysess'),
        os.path.join(store, 'tmp-missing.flysess'),
        store,
    ):
        assert write(held, path=path)['error'] == not_temp, path
    with open(victim, 'rb') as f:
        assert f.read() == b'keep'
    # Strict params; an unknown or streamed capture is not writable.
    assert write({'requestId': streamed['requestId']})['error']['message'] == (
        'params.captureRequestId names no held capture awaiting acknowledgment on this worker'
    )
    assert (
        code(
            w.call(
                'State.WritePayload',
                None,
                {'captureRequestId': held['requestId'], 'file': {'path': tmp, 'offset': '0', 'x': 1}},
            )[0]
        )
        == 'INVALID_ARGUMENT'
    )
    assert (
        code(
            w.call(
                'State.WritePayload', None, {'captureRequestId': held['requestId'], 'file': {'path': '', 'offset': '0'}}
            )[0]
        )
        == 'INVALID_ARGUMENT'
    )
    # `hold` is exactly true; no other Capture param is known (hashAtWrite included).
    for bad in ({'hold': False}, {'hashAtWrite': True}, {'hold': True, 'hashAtWrite': True}):
        assert code(w.call('State.Capture', sc(1), {**ref, **bad})[0]) == 'INVALID_ARGUMENT', bad
    # After a state-changing call the write refuses (it would hash a state that may have moved).
    _step(w, 1)
    assert write(held)['error'] == {
        'code': 'INVALID_PHASE',
        'mutation': 'none',
        'message': 'params.captureRequestId: this worker has served a state-changing call since that capture; '
        'capture again',
    }
    # Acknowledged: the held bytes are gone.
    w.call('Worker.Acknowledge', None, {'requestIds': [held['requestId']]})
    assert write(held)['error']['message'] == (
        'params.captureRequestId names no held capture awaiting acknowledgment on this worker'
    )


def _u64_refusal(field, shown):
    return {
        'code': 'INVALID_ARGUMENT',
        'mutation': 'none',
        'message': (
            f'{field}: {shown} is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)'
        ),
    }


def test_hold_from_is_a_u64_only_beside_hold_true_and_is_checked_before_the_cache(stepped):
    w, _ = stepped
    ref = {'checkpointId': 'ck-1', 'agentId': 'a-lif'}
    assert w.call('State.Capture', sc(1), {**ref, 'holdFrom': '0'})[0]['error'] == {
        'code': 'INVALID_ARGUMENT',
        'mutation': 'none',
        'message': 'params.holdFrom is allowed only with params.hold',
    }
    for hold in (False, None, 1, 'true'):
        assert w.call('State.Capture', sc(1), {**ref, 'hold': hold, 'holdFrom': '0'})[0]['error'] == {
            'code': 'INVALID_ARGUMENT',
            'mutation': 'none',
            'message': 'params.hold must be true when present',
        }, hold
    for bad, shown in (
        (65536, '65536'),
        ('01', '"01"'),
        ('x', '"x"'),
        ('', '""'),
        ('-1', '"-1"'),
        ('18446744073709551616', '"18446744073709551616"'),
        (None, 'null'),
        (True, 'true'),
    ):
        reply, _ = w.call('State.Capture', sc(1), {**ref, 'hold': True, 'holdFrom': bad})
        assert reply['error'] == _u64_refusal('params.holdFrom', shown), bad
    # The largest U64 is a valid holdFrom (nothing is that long: the capture streams).
    big, data = w.call('State.Capture', sc(1), {**ref, 'hold': True, 'holdFrom': '18446744073709551615'})
    assert code(big) == 'ok' and data
    # Refused before the cache lookup: a cached request id with a bad holdFrom is INVALID_ARGUMENT, not
    # CONFLICT nor the cached reply.
    reply, _ = w.call('State.Capture', sc(1), {**ref, 'hold': True, 'holdFrom': 'x'}, request_id=big['requestId'])
    assert reply['error'] == _u64_refusal('params.holdFrom', '"x"')
    reply, _ = w.call('State.Capture', sc(1), {**ref, 'holdFrom': '1'}, request_id=big['requestId'])
    assert reply['error']['message'] == 'params.holdFrom is allowed only with params.hold'


def test_a_capture_held_from_a_size_is_held_only_when_its_payload_is_at_least_that_long(stepped):
    import hashlib

    w, store = stepped
    ref = {'checkpointId': 'ck-1', 'agentId': 'a-lif'}
    streamed, data = w.call('State.Capture', sc(1), ref)
    size = len(data)
    tmp = os.path.join(store, 'tmp-ck-1.flysess')
    with open(tmp, 'wb') as f:
        f.write(bytes(size + 8))

    def write(capture):
        return w.call(
            'State.WritePayload', None, {'captureRequestId': capture['requestId'], 'file': {'path': tmp, 'offset': '4'}}
        )[0]

    # Shorter than holdFrom: the unheld reply (digest and size, the attachment), replayed as such.
    small_params = {**ref, 'hold': True, 'holdFrom': str(size + 1)}
    small, attachment = w.call('State.Capture', sc(1), small_params)
    assert attachment == data
    assert small['result'] == streamed['result']
    assert small['result']['payload'] == {'digest': hashlib.sha256(data).hexdigest(), 'byteLength': str(size)}
    assert w.call('State.Capture', sc(1), small_params, request_id=small['requestId']) == (small, data)
    # Nothing is held for it: WritePayload refuses it as any streamed capture.
    assert write(small)['error'] == {
        'code': 'INVALID_ARGUMENT',
        'mutation': 'none',
        'message': 'params.captureRequestId names no held capture awaiting acknowledgment on this worker',
    }
    # Another holdFrom (or plain hold) under the same request id is another request.
    for other in ({**ref, 'hold': True, 'holdFrom': '0'}, {**ref, 'hold': True}, ref):
        reply, _ = w.call('State.Capture', sc(1), other, request_id=small['requestId'])
        assert reply['error'] == {
            'code': 'CONFLICT',
            'mutation': 'none',
            'message': f'{small["requestId"]} was already used for a different State.Capture request',
        }, other
    # At least holdFrom long ("0", and exactly the size): held, the size alone and no attachment; the
    # write gives the digest of the very bytes the unheld capture sent.
    for hold_from in ('0', str(size)):
        params = {**ref, 'hold': True, 'holdFrom': hold_from}
        held, none = w.call('State.Capture', sc(1), params)
        assert none is None
        assert held['result'] == {**streamed['result'], 'payload': {'byteLength': str(size)}}
        assert w.call('State.Capture', sc(1), params, request_id=held['requestId']) == (held, None)
        reply, _ = w.call('State.Capture', sc(1), {**params, 'holdFrom': str(size + 1)}, request_id=held['requestId'])
        assert code(reply) == 'CONFLICT'
        assert write(held)['result'] == {'byteLength': str(size), 'digest': hashlib.sha256(data).hexdigest()}
        with open(tmp, 'rb') as f:
            assert f.read() == bytes(4) + data + bytes(4)
        with open(tmp, 'wb') as f:
            f.write(bytes(size + 8))
    # A held-from capture's write refuses after a state-changing call, as a plain held one's.
    held, _ = w.call('State.Capture', sc(1), {**ref, 'hold': True, 'holdFrom': '1'})
    _step(w, 1)
    assert code(write(held)) == 'INVALID_PHASE'


def test_an_environment_capture_held_from_a_size_is_held_or_streamed_by_its_size():
    import hashlib

    store = tempfile.mkdtemp(prefix='dpw-store-')
    w = Worker(role='environment', worker_id='w-env', extra=['--store-dir', store])
    try:
        assert w.hello(role='environment', worker_id='w-env')['result']['capabilities'] == [
            'capture-hold-from-v1',
            'checkpoint-v1',
            'store-files-v1',
            'world-step-v1',
        ]
        ports = [{'portId': 'p0', 'agentId': 'a'}]
        assert code(w.call('Environment.Initialize', sc(0), forage_init(ports))[0]) == 'ok'
        ref = {'checkpointId': 'ck-1', 'agentId': None}
        streamed, data = w.call('State.Capture', sc(0), ref)
        small, attachment = w.call('State.Capture', sc(0), {**ref, 'hold': True, 'holdFrom': str(len(data) + 1)})
        assert (small['result'], attachment) == (streamed['result'], data)
        held, none = w.call('State.Capture', sc(0), {**ref, 'hold': True, 'holdFrom': str(len(data))})
        assert none is None
        assert held['result'] == {**streamed['result'], 'payload': {'byteLength': str(len(data))}}
        tmp = os.path.join(store, 'tmp-ck-1.flysess')
        with open(tmp, 'wb') as f:
            f.write(bytes(len(data)))
        wrote, _ = w.call(
            'State.WritePayload', None, {'captureRequestId': held['requestId'], 'file': {'path': tmp, 'offset': '0'}}
        )
        assert wrote['result'] == {'byteLength': str(len(data)), 'digest': hashlib.sha256(data).hexdigest()}
        with open(tmp, 'rb') as f:
            assert f.read() == data
    finally:
        w.stop()


def test_a_worker_without_a_store_refuses_to_hold_a_capture():
    w = Worker()
    try:
        assert w.hello()['result']['capabilities'] == [
            'agent-step-v1',
            'checkpoint-v1',
        ]  # no payload files without a store: neither store-files-v1 nor capture-hold-from-v1
        w.call('Agent.Initialize', sc(0), {'agents': AGENTS})
        no_store = {
            'code': 'UNSUPPORTED',
            'mutation': 'none',
            'message': ('params.file: this worker was started without --store-dir and writes no checkpoint files'),
        }
        ref = {'checkpointId': 'ck-0', 'agentId': 'a-walk'}
        for hold in ({'hold': True}, {'hold': True, 'holdFrom': '0'}, {'hold': True, 'holdFrom': '65536'}):
            reply, _ = w.call('State.Capture', sc(0), {**ref, **hold})
            assert reply['error'] == no_store, hold
        # The params' own refusals come first: holdFrom without hold, and hold other than true.
        assert w.call('State.Capture', sc(0), {**ref, 'holdFrom': '0'})[0]['error'] == {
            'code': 'INVALID_ARGUMENT',
            'mutation': 'none',
            'message': 'params.holdFrom is allowed only with params.hold',
        }
        assert w.call('State.Capture', sc(0), {**ref, 'hold': False, 'holdFrom': '0'})[0]['error'] == {
            'code': 'INVALID_ARGUMENT',
            'mutation': 'none',
            'message': 'params.hold must be true when present',
        }
    finally:
        w.stop()


def test_a_prefetched_payload_is_confirmed_and_staged_and_a_file_changed_since_is_read_again_and_refused(stepped):
    w, store = stepped
    cap, data = w.call('State.Capture', sc(1), {'checkpointId': 'ck-1', 'agentId': 'a-lif'})
    path = os.path.join(store, 'ck-1.flysess')
    with open(path, 'wb') as f:
        f.write(b'xyz' + data)
    result = cap['result']
    ref = dict(result['payload'], file={'path': path, 'offset': '3'})

    def prefetch(payload, agent='a-lif'):
        return w.call('State.PrefetchPayload', sc(1), {'agentId': agent, 'payload': payload})[0]

    assert prefetch(dict(ref, digest='0' * 64))['result'] == {'matched': False}
    assert prefetch(None)['result'] == {'matched': False}
    assert code(prefetch(dict(ref, extra=1))) == 'INVALID_ARGUMENT'
    assert prefetch(dict(ref, file={'path': '/etc/passwd', 'offset': '0'}))['error']['message'] == (
        "params.payload.file.path is not a regular file inside this worker's store directory"
    )
    stage = {
        'checkpointId': 'ck-1',
        'agentId': 'a-lif',
        'sourceScope': sc(1),
        'compatibilityDigest': result['compatibilityDigest'],
        'payload': ref,
    }
    # Prefetched, then the file changes: the stage reads it again, and its digest check refuses.
    assert prefetch(ref)['result'] == {'matched': True}
    at = 3 + len(data) // 2
    with open(path, 'r+b') as f:
        f.seek(at)
        f.write(bytes([data[at - 3] ^ 0xFF]))
    refused = w.call('State.StageRestore', sc(1, 'e2'), stage)[0]
    assert refused['error']['code'] == 'BUFFER_INVALID'
    # Repaired and prefetched again: the stage of that very range goes through.
    with open(path, 'r+b') as f:
        f.seek(at)
        f.write(bytes([data[at - 3]]))
    assert prefetch(ref)['result'] == {'matched': True}
    assert code(w.call('State.StageRestore', sc(1, 'e2'), stage)[0]) == 'ok'


def test_a_stage_takes_prefetched_bytes_only_for_the_very_range_and_digest_and_uses_them_up():
    from detsim_worker.restore_prefetch import PrefetchedPayloads

    store = tempfile.mkdtemp(prefix='dpw-store-')
    path = os.path.join(store, 'ck.flysess')
    with open(path, 'wb') as f:
        f.write(b'--payload--')
    digest = sha256_hex(b'payload')
    params = {'agentId': 'a', 'payload': {'digest': digest, 'byteLength': '7', 'file': {'path': path, 'offset': '2'}}}
    p = PrefetchedPayloads()
    assert p.prefetch(params, store)['result'] == {'matched': True}
    assert p.take('a', (path, 3), '7', digest) is None  # another range: not used, and used up
    assert p.take('a', (path, 2), '7', digest) is None
    p.prefetch(params, store)
    assert p.take('b', (path, 2), '7', digest) is None  # another participant's
    assert p.take('a', (path, 2), '7', digest) == b'payload'
    assert p.take('a', (path, 2), '7', digest) is None


def test_a_strict_callback_longer_than_a_second_leaves_the_server_serving():
    # gRPC's server loop calls time.time() every second on its own thread; strict mode once trapped it
    # there and the worker stopped answering (the run waited out its deadline).
    spec = 'python:strict_models:Slow'
    w = Worker(extra=['--model', spec, '--strict'], cwd=Path(__file__).parent)  # strict_models.py is importable there
    w.stream[0].put(None)
    w.stream = w.open_stream(timeout=30)  # a worker that stopped answering fails this test, never hangs it
    try:
        w.hello()
        agent = {'agentId': 'a-slow', 'model': spec, 'params': {}, 'seed': 1, 'stepDuration': STEP, 'observation': {}}
        assert code(w.call('Agent.Initialize', sc(0), {'agents': [agent]})[0]) == 'ok'
        assert code(w.call('Agent.Prepare', sc(0), {'agents': [{'agentId': 'a-slow'}]})[0]) == 'ok'
        assert w.proc.poll() is None
    finally:
        w.stop()


def test_a_worker_whose_grpc_serving_thread_ends_exits_1_naming_it():
    # Before, such a worker stayed alive and silent, and its run waited out the step deadline.
    spec = 'python:strict_models:BreaksTheServer'
    w = Worker(extra=['--model', spec], cwd=Path(__file__).parent, stderr=subprocess.PIPE)
    try:
        w.hello()
        agent = {'agentId': 'a-b', 'model': spec, 'params': {}, 'seed': 1, 'stepDuration': STEP, 'observation': {}}
        assert code(w.call('Agent.Initialize', sc(0), {'agents': [agent]})[0]) == 'ok'
        assert w.proc.wait(timeout=20) == 1
        assert w.proc.stderr.read().splitlines()[-1] == (
            "detsim worker w-1: the serving thread 'Thread-1 (_serve)' ended; this worker can no longer answer "
            'and exits'
        )
    finally:
        if w.proc.poll() is None:
            w.stop()


def test_shutdown_exits_0_and_a_closed_stdin_too():
    w = Worker()
    w.hello()
    assert w.call('Worker.Shutdown', None, {'reason': 'done'})[0]['result'] == {'stopping': True}
    assert w.proc.wait(timeout=10) == 0
    orphan = Worker()
    orphan.proc.stdin.close()
    assert orphan.proc.wait(timeout=10) == 0
    assert not os.path.exists(orphan.ready['listen'][len('unix:') :])


@pytest.mark.parametrize(
    'args,stderr',
    [
        (['--bogus'], "detsim worker: Unknown option '--bogus'\n"),
        (
            ['--listen', '0.0.0.0:0', '--role', 'agent', '--worker-id', 'w'],
            'detsim: [perm_listen_not_local] --listen: "0.0.0.0" is not a loopback address; without TLS a worker '
            'listens only on '
            'unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer '
            'token (--tls-dir)\n',
        ),
        (
            ['--listen', 'unix:/tmp/x.sock', '--role', 'agent', '--worker-id', 'Bad'],
            'detsim: [struct_invalid_id] --worker-id "Bad" is not an Id\n',
        ),
    ],
)
def test_bad_flags_are_refused_in_one_line_exit_2(args, stderr):
    r = subprocess.run([sys.executable, '-m', 'detsim_worker', *args], capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stderr, r.stdout) == (2, stderr, '')


def test_an_environment_worker_on_loopback_tcp_initializes_advances_and_caches():
    w = Worker.__new__(Worker)
    # On TCP it is bound to a session and holds a run secret (docs/security.md), which the stream presents.
    w.token = 'e' * 64
    secret_dir = tempfile.mkdtemp(prefix='dpw-secret-')
    with open(os.path.join(secret_dir, 'token'), 'w', opener=lambda p, f: os.open(p, f, 0o600)) as f:
        f.write(w.token + '\n')
    w.proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'detsim_worker',
            '--listen',
            '127.0.0.1:0',
            '--role',
            'environment',
            '--worker-id',
            'w-env',
            '--session',
            SESSION,
            '--token-file',
            os.path.join(secret_dir, 'token'),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    w.ready = json.loads(w.proc.stdout.readline())
    assert w.ready['listen'].startswith('127.0.0.1:') and not w.ready['listen'].endswith(':0')
    w.channel = grpc.insecure_channel(w.ready['listen'])
    w.next_id = 0
    w.stream = w.open_stream()
    try:
        assert w.hello(role='environment', worker_id='w-env')['result']['capabilities'] == [
            'checkpoint-v1',
            'world-step-v1',
        ]
        ports = [{'portId': 'p0', 'agentId': 'z'}, {'portId': 'p1', 'agentId': 'a'}]
        init, _ = w.call('Environment.Initialize', sc(0), forage_init(ports))
        assert [o['agentId'] for o in init['result']['observations']] == ['a', 'z']
        advance = {'batchId': 'b-0', 'actions': [{**p, 'action': {'move': 'east'}} for p in ports]}
        first, _ = w.call('Environment.Advance', sc(0), advance)
        assert first['result']['nextStep'] == '1'
        assert w.call('Environment.Advance', sc(0), advance, request_id=first['requestId'])[0] == first
        assert code(w.call('Environment.Advance', sc(0), dict(advance, batchId='b-x'))[0]) == 'CONFLICT'
        bad = {'batchId': 'b-1', 'actions': [{**p, 'action': {'move': 'up'}} for p in ports]}
        assert (
            w.call('Environment.Advance', sc(1), bad)[0]['error']['message']
            == 'actions[p0].move: "up" is not one of stay, north, east, south, west'
        )
    finally:
        w.stop()


def test_a_strict_python_environment_model_is_captured_after_the_exactness_check():
    # The strict capture check of a user's Python environment model (capture_check.exact_capture) once
    # failed with NameError (never imported there), so every strict capture of one was INTERNAL.
    spec = 'python:strict_models:PyForage'
    w = Worker(role='environment', worker_id='w-env', extra=['--model', spec, '--strict'], cwd=Path(__file__).parent)
    try:
        w.hello(role='environment', worker_id='w-env')
        ports = [{'portId': 'p0', 'agentId': 'a'}]
        init = {'environmentId': 'forage', 'model': spec, 'params': {'width': 5, 'height': 4, 'food': 3}, 'seed': 7}
        assert code(w.call('Environment.Initialize', sc(0), {**init, 'stepDuration': STEP, 'ports': ports})[0]) == 'ok'
        reply, attachment = w.call('State.Capture', sc(0), {'checkpointId': 'ck-1', 'agentId': None})
        assert code(reply) == 'ok', reply
        assert attachment
    finally:
        w.stop()


def test_a_digest_that_is_not_json_is_refused_naming_digest_not_advance():
    spec = 'python:strict_models:Int32Digest'
    w = Worker(role='environment', worker_id='w-env', extra=['--model', spec], cwd=Path(__file__).parent)
    try:
        w.hello(role='environment', worker_id='w-env')
        ports = [{'portId': 'p0', 'agentId': 'a'}]
        init = {'environmentId': 'forage', 'model': spec, 'params': {'width': 5, 'height': 4, 'food': 3}, 'seed': 7}
        assert code(w.call('Environment.Initialize', sc(0), {**init, 'stepDuration': STEP, 'ports': ports})[0]) == 'ok'
        advance = {'batchId': 'b-0', 'actions': [{**p, 'action': {'move': 'east'}} for p in ports]}
        message = w.call('Environment.Advance', sc(0), advance)[0]['error']['message']
        assert (
            message
            == 'environment forage: digest returned a value that is not JSON: int32 at $.n cannot be written as JSON'
        )
    finally:
        w.stop()
