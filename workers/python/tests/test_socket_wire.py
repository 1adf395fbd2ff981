# The Python worker process over the socket wire (`--wire socket`, socket_wire.py) on a real Unix
# socket: Hello, a step, a capture carried as an attachment; Hello first per connection; a header
# announcing an attachment before Hello or a body past the limit ends that connection from the header
# alone (the worker names it and keeps serving); Shutdown; the --wire flag refusals worded as the
# TypeScript worker's. The lockstep runs of examples/mixed-python.yaml cover it end to end (vitest).
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile

from detsim_worker.canonical_json import canonical_bytes, parse_strict
from detsim_worker.runtime import CONTRACT_DIGEST

SESSION = 's-1'
STEP = {'numerator': '50000000', 'denominator': '3'}
HEAD = struct.Struct('>II')


def sc(step, epoch='e1'):
    return {'sessionId': SESSION, 'epoch': epoch, 'step': str(step)}


def read_exact(conn, n):
    data = b''
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError('the worker ended the connection')
        data += chunk
    return data


def ended(conn):
    """Whether the worker ended the connection (a close, or a reset when our bytes were left unread)."""
    try:
        return conn.recv(1) == b''
    except ConnectionResetError:
        return True


class Wire:
    """A worker started with --wire socket and raw connections to it."""

    def __init__(self, extra=(), python_flags=()):
        self.dir = tempfile.mkdtemp(prefix='dpws-')
        self.proc = subprocess.Popen(
            [sys.executable, *python_flags, '-m', 'detsim_worker', '--listen', f'unix:{self.dir}/w.sock']
            + ['--role', 'agent']
            + ['--worker-id', 'w-1', '--wire', 'socket', *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.ready = json.loads(self.proc.stdout.readline())
        self.next_id = 0

    def connect(self):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.ready['listen'][len('unix:') :])
        return conn

    def call(self, conn, method, scope, params, attachment=None):
        self.next_id += 1
        body = canonical_bytes({'method': method, 'requestId': f'req-{self.next_id}', 'scope': scope, 'params': params})
        conn.sendall(HEAD.pack(len(body), len(attachment or b'')) + body + (attachment or b''))
        body_len, attachment_len = HEAD.unpack(read_exact(conn, HEAD.size))
        reply = parse_strict(read_exact(conn, body_len))
        return reply, (read_exact(conn, attachment_len) if attachment_len else None)

    def hello(self, conn):
        params = {
            'sessionId': SESSION,
            'expectedWorkerId': 'w-1',
            'role': 'agent',
            'supportedMajors': [1],
            'contractDigest': CONTRACT_DIGEST,
        }
        return self.call(conn, 'Worker.Hello', None, params)[0]

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


WALKER = {'agentId': 'a-walk', 'model': 'walker', 'params': {}, 'seed': 7, 'stepDuration': STEP, 'observation': {}}


def test_a_capture_restored_into_a_second_worker_decides_alike_then_shutdown():
    a, b = Wire(), Wire()
    try:
        assert a.ready['listen'].startswith('unix:')
        ca, cb = a.connect(), b.connect()
        assert a.hello(ca)['type'] == 'result' and b.hello(cb)['type'] == 'result'
        lif = {**WALKER, 'agentId': 'a-lif', 'model': 'lif', 'params': {'neurons': 4096}}
        assert a.call(ca, 'Agent.Initialize', sc(0), {'agents': [lif]})[0]['type'] == 'result'
        agent = {'agentId': 'a-lif'}
        reply, data = a.call(ca, 'State.Capture', sc(0), {'checkpointId': 'ck-1', **agent})
        assert len(data) == int(reply['result']['payload']['byteLength']) > 4096  # the attachment, whole
        stage = {
            'checkpointId': 'ck-1',
            **agent,
            'sourceScope': sc(0),
            'compatibilityDigest': reply['result']['compatibilityDigest'],
            'payload': reply['result']['payload'],
        }
        staged = b.call(cb, 'State.StageRestore', sc(0, 'e2'), stage, attachment=data)[0]
        token = staged['result']['restoreToken']
        assert b.call(cb, 'State.ActivateRestore', sc(0, 'e2'), {'restoreToken': token, **agent})[0]['type'] == 'result'
        pa = a.call(ca, 'Agent.Prepare', sc(0), {'agents': [agent]})[0]['result']
        pb = b.call(cb, 'Agent.Prepare', sc(0, 'e2'), {'agents': [agent]})[0]['result']
        assert pa == pb
        stopped = a.call(ca, 'Worker.Shutdown', None, {'reason': 'done'})[0]
        assert stopped['result'] == {'stopping': True}
        assert a.proc.wait(timeout=10) == 0
        assert not os.path.exists(a.ready['listen'][len('unix:') :])
    finally:
        for w in (a, b):
            if w.proc.poll() is None:
                w.stop()


def test_hello_first_per_connection_and_bad_headers_end_only_their_connection():
    w = Wire()
    try:
        coordinator = w.connect()
        assert w.hello(coordinator)['type'] == 'result'
        stranger = w.connect()
        refused = w.call(stranger, 'Worker.Status', None, {})[0]
        assert refused['error']['message'] == 'Worker.Status before Worker.Hello'
        # 1 GiB announced before Hello, 7 body bytes sent: ended from the header, nothing awaited.
        early = w.connect()
        early.sendall(HEAD.pack(7, 1024 * 1024 * 1024) + b'{"a":1}')
        assert ended(early)
        big = w.connect()
        big.sendall(HEAD.pack(8 * 1024 * 1024 + 1, 0))
        assert ended(big)
        empty = w.connect()
        empty.sendall(HEAD.pack(0, 0))
        assert ended(empty)
        assert w.call(coordinator, 'Worker.Status', None, {})[0]['type'] == 'result'
        w.stop()
        lines = w.proc.stderr.read().splitlines()
        assert (
            'detsim worker w-1: framing error, stream ended: an attachment before Worker.Hello on this connection'
            in lines
        )
        assert 'detsim worker w-1: framing error, stream ended: a body of 8388609 bytes exceeds 8388608' in lines
        assert 'detsim worker w-1: framing error, stream ended: a message without a body' in lines
    finally:
        if w.proc.poll() is None:
            w.stop()


def test_a_worker_on_the_socket_wire_never_imports_grpc():
    # -X importtime lists every module imported on stderr; grpcio costs ~0.1 s of every start.
    w = Wire(python_flags=('-X', 'importtime'))
    try:
        conn = w.connect()
        assert w.hello(conn)['type'] == 'result'
        assert w.call(conn, 'Agent.Initialize', sc(0), {'agents': [WALKER]})[0]['type'] == 'result'
        w.stop()
        imported = [line.rsplit('|', 1)[-1].strip() for line in w.proc.stderr.read().splitlines() if '|' in line]
        assert 'detsim_worker.socket_wire' in imported
        assert not [m for m in imported if m == 'grpc' or m.startswith('grpc.')]
    finally:
        if w.proc.poll() is None:
            w.stop()


def test_wire_flag_refusals_are_worded_as_the_typescript_worker():
    d = tempfile.mkdtemp(prefix='dpws-')
    token = os.path.join(d, 't')
    with open(token, 'w') as f:
        f.write('ab' * 32 + '\n')
    os.chmod(token, 0o600)

    def run(*args):
        base = [sys.executable, '-m', 'detsim_worker', '--role', 'agent', '--worker-id', 'w1', '--no-parent-watch']
        return subprocess.run(base + list(args), capture_output=True, text=True, timeout=30)

    socket_only = (
        'detsim: [struct_invalid_field] --wire socket is for a worker its coordinator starts on a unix socket '
        '(no TCP, no --rendezvous)\n'
    )
    tcp = run('--listen', '127.0.0.1:0', '--session', 's1', '--token-file', token, '--wire', 'socket')
    assert (tcp.returncode, tcp.stderr) == (2, socket_only)
    rdv = run('--listen', f'unix:{d}/w.sock', '--rendezvous', d, '--wire', 'socket')
    assert (rdv.returncode, rdv.stderr) == (2, socket_only)
    bad = run('--listen', f'unix:{d}/w.sock', '--wire', 'http2')
    assert (bad.returncode, bad.stderr) == (
        2,
        'detsim: [struct_invalid_field] --wire must be grpc or socket, not "http2"\n',
    )
