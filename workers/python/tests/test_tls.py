# The Python worker's TLS flags and token check (detsim_worker/tls.py), worded as the TypeScript
# worker's: the constant-time bearer check, the flag refusals, a non-loopback listen accepted only
# with TLS, and TLS refused on a Unix socket. The stranger clients against a live TLS worker are
# vitest's (test/workers/tls.test.ts, which runs this worker too); this suite runs without Node.
import subprocess
import sys

import pytest
from detsim_worker.tls import check_bearer

TOKEN = 'a' * 64


def test_check_bearer_accepts_only_the_run_token():
    assert check_bearer(TOKEN, f'Bearer {TOKEN}') is None
    assert check_bearer(TOKEN, f'Bearer {"b" * 64}') == 'ident_token_wrong'
    assert check_bearer(TOKEN, 'Bearer a') == 'ident_token_wrong'
    assert check_bearer(TOKEN, None) == 'ident_token_missing'
    assert check_bearer(TOKEN, 'Bearer ') == 'ident_token_missing'
    assert check_bearer(TOKEN, f'Basic {TOKEN}') == 'ident_token_missing'


def run(*args):
    r = subprocess.run(
        [sys.executable, '-m', 'detsim_worker', '--role', 'agent', '--worker-id', 'w', *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.returncode, r.stderr


@pytest.mark.parametrize(
    'args,stderr',
    [
        (
            ['--listen', '0.0.0.0:0', '--tls-cert', '/x/worker.pem'],
            'detsim: [struct_missing_field] --tls-ca is required with --tls-cert (or give --tls-dir DIR made by '
            'detsim certs)\n',
        ),
        (
            ['--listen', '0.0.0.0:0', '--tls-dir', '/nonexistent-tls'],
            'detsim: [perm_tls_unreadable] --tls-dir: token /nonexistent-tls/token cannot be read (ENOENT)\n',
        ),
        (
            ['--listen', 'unix:/tmp/x.sock', '--tls-dir', '/nonexistent-tls'],
            'detsim: [struct_invalid_field] --tls-dir: TLS is for TCP workers; a unix socket is reachable only from '
            'this machine\n',
        ),
    ],
)
def test_tls_flag_refusals_as_the_typescript_worker(args, stderr):
    assert run(*args) == (2, stderr)
