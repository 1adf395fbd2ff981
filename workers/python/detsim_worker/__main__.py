# Worker process entry: `python -m detsim_worker --listen unix:/path|host:port --role agent|environment
# --worker-id <Id> [--session <Id>] [--model python:pkg.mod:Class]… [--model-path DIR]… [--strict]
# [--max-message-bytes N] [--no-parent-watch] [--store-dir <abs path> [--store-id <token>]] [--verbose]
# [--tls-dir DIR | --tls-ca F --tls-cert F --tls-key F --token-file F] (mutual TLS + bearer token)
# [--token-file F] (plaintext TCP: the run's secret) [--wire grpc|socket]` (--verbose: a model's failure
# carries its traceback; --wire socket: the socket wire of socket_wire.py, for a worker its coordinator starts).
# Flag checks worded as workers/main.ts + process.ts;
# prints the one ready line; exits 0 on Shutdown, SIGTERM/SIGINT/SIGHUP, or when its parent goes away.
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import sys
import threading

from .rendezvous import (
    advertised_address,
    certificate_fingerprint,
    check_advertise,
    check_rendezvous_dir,
    live_namesake,
    remove_record,
    write_record,
)
from .scalars import InputError, is_id
from .store_id import STORE_ID_PATTERN, store_holds_id

VALUE_FLAGS = {
    '--listen',
    '--role',
    '--worker-id',
    '--session',
    '--model',
    '--model-path',
    '--max-message-bytes',
    '--store-dir',
    '--store-id',
    '--rendezvous',
    '--advertise',
    '--tls-dir',
    '--tls-ca',
    '--tls-cert',
    '--tls-key',
    '--token-file',
    '--wire',
}
BOOL_FLAGS = {'--strict', '--no-parent-watch', '--verbose'}


class UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> dict:
    values: dict = {'--model': [], '--model-path': []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition('=')
        if name in BOOL_FLAGS and not eq:
            values[name] = True
        elif name in VALUE_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv) and not argv[i + 1].startswith('--'):
                i += 1
                value = argv[i]
            else:
                raise UsageError(f"Option '{name} <value>' argument missing")
            if name in ('--model', '--model-path'):
                values[name].append(value)
            else:
                values[name] = value
        elif arg.startswith('-'):
            raise UsageError(f"Unknown option '{arg}'")
        else:
            raise UsageError(f"Unexpected argument '{arg}'. This command does not take positional arguments")
        i += 1
    return values


def read_options(v: dict) -> dict:
    from .listen import parse_listen_address
    from .protocol import DEFAULT_MAX_MESSAGE_BYTES
    from .tls import describe_field, read_plain_token, read_tls_flags, read_tls_material

    listen = v.get('--listen')
    if listen is None:
        raise InputError('struct_missing_field', '--listen unix:/abs/path|host:port is required')
    tls_paths = read_tls_flags(v)
    tcp = parse_listen_address(listen, '--listen', tls_paths is not None).kind == 'tcp'
    if not tcp and tls_paths is not None:
        raise InputError(
            'struct_invalid_field',
            '--tls-dir: TLS is for TCP workers; a unix socket is reachable only from this machine',
        )
    plain_token = read_plain_token(v, tcp) if tls_paths is None else None
    role = v.get('--role')
    if role not in ('agent', 'environment'):
        raise InputError('struct_invalid_field', f'--role must be agent or environment, not {json.dumps(role)}')
    worker_id = v.get('--worker-id')
    if not is_id(worker_id):
        raise InputError('struct_invalid_id', f'--worker-id {json.dumps(worker_id)} is not an Id')
    session = v.get('--session')
    if session is not None and not is_id(session):
        raise InputError('struct_invalid_id', f'--session {json.dumps(session)} is not an Id')
    max_bytes = DEFAULT_MAX_MESSAGE_BYTES
    if '--max-message-bytes' in v:
        try:
            max_bytes = int(v['--max-message-bytes'])
        except ValueError:
            max_bytes = -1
        if not 2 * 1024 * 1024 <= max_bytes <= 1024 * 1024 * 1024:
            raise InputError(
                'struct_invalid_field', '--max-message-bytes must be an integer from 2 MiB to 1 GiB (chunks are 1 MiB)'
            )
    for spec in v['--model']:
        module, _, cls = spec.removeprefix('python:').partition(':')
        if not spec.startswith('python:') or not module or not cls:
            raise InputError(
                'struct_unknown_model',
                f'--model {json.dumps(spec)}: a Python model is named python:package.module:Class',
            )
    for path in v['--model-path']:
        if not os.path.isabs(path):
            raise InputError('struct_invalid_field', f'--model-path {json.dumps(path)} is not an absolute path')
    store_dir = v.get('--store-dir')
    if store_dir is not None and not os.path.isabs(store_dir):
        raise InputError('struct_invalid_field', f'--store-dir {json.dumps(store_dir)} is not an absolute path')
    store_id = v.get('--store-id')
    if store_id is not None and not STORE_ID_PATTERN.match(store_id):
        raise InputError('struct_invalid_field', '--store-id must be 32 lowercase hex digits')
    if store_id is not None and store_dir is None:
        raise InputError('struct_invalid_field', '--store-id names the token of a --store-dir; give both')
    rendezvous = check_rendezvous_dir(v.get('--rendezvous'))
    check_advertise(listen, rendezvous, v.get('--advertise'))
    taken = live_namesake(rendezvous, worker_id) if rendezvous is not None else None
    if taken is not None:
        raise InputError(
            'ident_rendezvous_taken',
            f'--worker-id {worker_id}: {taken[0]} names a worker of this id that answers at {taken[1]}; '
            'stop it first, or start this one with another --worker-id',
        )
    wire = read_wire(v.get('--wire', 'grpc'), tcp, rendezvous is not None)
    return {
        'wire': wire,
        'listen': listen,
        'role': role,
        'worker_id': worker_id,
        'session': session,
        'strict': v.get('--strict', False),
        'max_message_bytes': max_bytes,
        'models': sorted(set(v['--model'])),
        'store_dir': store_dir,
        'model_paths': list(v['--model-path']),
        'store_id': store_id,
        'parent_watch': not v.get('--no-parent-watch', False),
        'verbose': v.get('--verbose', False),
        'rendezvous': rendezvous,
        'advertise': v.get('--advertise'),
        'tls': read_tls_material(tls_paths, describe_field(v)) if tls_paths is not None else None,
        'token': plain_token,
    }


def read_wire(wire: str, tcp: bool, rendezvous: bool) -> str:
    """`--wire grpc|socket`: the socket wire only on a unix socket, never with --rendezvous (as process.ts)."""
    if wire not in ('grpc', 'socket'):
        raise InputError('struct_invalid_field', f'--wire must be grpc or socket, not {json.dumps(wire)}')
    if wire == 'socket' and (tcp or rendezvous):
        raise InputError(
            'struct_invalid_field',
            '--wire socket is for a worker its coordinator starts on a unix socket (no TCP, no --rendezvous)',
        )
    return wire


def watch_parent(on_gone) -> None:
    """Orphan guard: leave when stdin (a pipe from the launcher) closes or the parent pid changes."""
    try:
        mode = os.fstat(0).st_mode
        stdin_is_pipe = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    except OSError:
        stdin_is_pipe = False
    if stdin_is_pipe:

        def drain() -> None:
            try:
                while os.read(0, 65536):
                    pass
            except OSError:
                pass
            on_gone()

        threading.Thread(target=drain, daemon=True, name='stdin-watch').start()
    parent = os.getppid()

    def poll() -> None:
        while not stop_event.wait(0.5):
            if os.getppid() != parent:
                on_gone()
                return

    threading.Thread(target=poll, daemon=True, name='ppid-watch').start()


stop_event = threading.Event()


def usable_store_dir(options: dict) -> str | None:
    """--store-dir, unless --store-id was given and the directory does not hold it (workers/process.ts "
    "usableStoreDir)."""
    store_dir, store_id = options['store_dir'], options['store_id']
    if store_dir is None or store_id is None or store_holds_id(store_dir, store_id):
        return store_dir
    sys.stderr.write(
        f"detsim worker {options['worker_id']}: --store-dir {store_dir} does not hold this run's store id "
        "(not the coordinator's store here); checkpoint payloads travel as attachments\n"
    )
    return None


def main(argv: list[str]) -> int:
    try:
        options = read_options(parse_args(argv))
    except UsageError as e:
        sys.stderr.write(f'detsim worker: {e}\n')
        return 2
    except InputError as e:
        sys.stderr.write(f'detsim: [{e.reason}] {e}\n')
        return 2
    from .model_call import include_tracebacks
    from .runtime import WorkerRuntime

    include_tracebacks(options['verbose'])
    # Where the run's own models are imported from (the config file's directory), ahead of the rest.
    sys.path[:0] = [p for p in options['model_paths'] if p not in sys.path]
    from .listen import remove_stale_socket

    runtime = WorkerRuntime(
        options['role'],
        options['worker_id'],
        options['session'],
        options['strict'],
        options['max_message_bytes'],
        options['models'],
        usable_store_dir(options),
    )
    # The Shutdown reply is yielded before this fires; the grace period below lets it reach the caller.
    before = set(threading.enumerate())
    on_stop = lambda: threading.Timer(0.05, stop_event.set).start()  # noqa: E731
    try:
        if options['wire'] == 'socket':
            from .socket_wire import start_socket_server

            bound = options['listen']
            server = start_socket_server(bound[len('unix:') :], runtime, on_stop)
        else:
            from .server import start_server  # grpcio: only a worker that serves gRPC loads it

            server, bound = start_server(options['listen'], runtime, on_stop, options['tls'], options['token'])
    except (OSError, RuntimeError) as e:
        sys.stderr.write(f'detsim worker: cannot start: {e}\n')
        return 1
    # The threads the server began (gRPC's serving loop, the socket wire's accept loop): when one ends,
    # nobody answers any more.
    serving = [t for t in threading.enumerate() if t not in before]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGHUP: the terminal of a hand-started worker closed
        signal.signal(sig, lambda *_: stop_event.set())
    if options['parent_watch']:
        watch_parent(stop_event.set)
    joined = None
    if options['rendezvous'] is not None:
        from .runtime import CONTRACT_DIGEST

        # A TLS worker names the certificate it serves, so the coordinator can pin it; null in plaintext.
        try:
            joined = write_record(
                options['rendezvous'],
                options['worker_id'],
                options['role'],
                advertised_address(bound, options['advertise']),
                options['session'],
                CONTRACT_DIGEST,
                certificate_fingerprint(options['tls'].cert) if options['tls'] is not None else None,
            )
        except OSError as e:
            code = errno.errorcode.get(e.errno or 0, 'error')
            sys.stderr.write(f"detsim: [perm_write_failed] --rendezvous: cannot write this worker's record ({code})\n")
            server.stop(0)
            return 2
    sys.stdout.write(json.dumps({'ready': True, 'listen': bound, 'pid': os.getpid()}, separators=(',', ':')) + '\n')
    sys.stdout.flush()
    ended = wait_for_stop(serving)
    if ended is not None:
        # A worker that can no longer answer leaves at once, so its coordinator sees it die instead
        # of waiting out a deadline on a process that is alive and silent.
        sys.stderr.write(
            f'detsim worker {options["worker_id"]}: the serving thread {ended.name!r} ended; '
            'this worker can no longer answer and exits\n'
        )
    if joined is not None:
        remove_record(*joined)
    server.stop(0.5).wait(2)
    if bound.startswith('unix:'):
        remove_stale_socket(bound[len('unix:') :])
    return 0 if ended is None else 1


def wait_for_stop(serving: list[threading.Thread]) -> threading.Thread | None:
    """Wait until told to stop (None), or until one of the serving threads ends first (that thread)."""
    while not stop_event.wait(0.25):
        for t in serving:
            if not t.is_alive():
                return t
    return None


if __name__ == '__main__':
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # grpc's threads must not keep a stopped worker alive
