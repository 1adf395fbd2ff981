# Rendezvous records of the Python worker (detsim_worker/rendezvous.py): the advertised address
# (port 0 = the bound port), the canonical record bytes, the atomic write (no temporary left) and
# removal only while the record is still this worker's. The byte-for-byte comparison with the
# TypeScript worker is vitest's (test/coordinator/rendezvous.test.ts); this suite runs without Node.
import os

import pytest
from detsim_worker.rendezvous import advertised_address, check_advertise, record_bytes, remove_record, write_record
from detsim_worker.scalars import InputError

DIGEST = 'ab' * 32


def test_advertised_address_keeps_the_bound_port_for_port_0():
    assert advertised_address('127.0.0.1:40123', None) == '127.0.0.1:40123'
    assert advertised_address('127.0.0.1:40123', '10.0.0.2:0') == '10.0.0.2:40123'
    assert advertised_address('127.0.0.1:40123', '10.0.0.2:7000') == '10.0.0.2:7000'


def test_check_advertise_refusals():
    with pytest.raises(InputError, match='only used with --rendezvous'):
        check_advertise('127.0.0.1:0', None, '10.0.0.2:1')
    with pytest.raises(InputError, match='must be HOST:PORT'):
        check_advertise('127.0.0.1:0', '/tmp', 'unix:/x')
    with pytest.raises(InputError, match='required with --rendezvous when listening on 0.0.0.0'):
        check_advertise('0.0.0.0:0', '/tmp', None)
    check_advertise('127.0.0.1:0', '/tmp', None)


def test_write_is_canonical_atomic_and_removal_spares_a_newer_record(tmp_path):
    path, data = write_record(str(tmp_path), 'worker-0', 'agent', '10.0.0.2:7000', None, DIGEST)
    assert os.listdir(tmp_path) == ['worker-0.json']
    assert data == (
        b'{"address":"10.0.0.2:7000","certificateFingerprint":null,"contractDigest":"'
        + DIGEST.encode()
        + b'","format":"detsim-rendezvous-v1","role":"agent","session":null,"workerId":"worker-0"}\n'
    )
    assert record_bytes({'b': 1, 'a': 2}) == b'{"a":2,"b":1}\n'
    newer, _ = write_record(str(tmp_path), 'worker-0', 'agent', '10.0.0.3:7000', 's', DIGEST)
    remove_record(path, data)
    assert os.path.exists(newer)
    remove_record(newer, open(newer, 'rb').read())
    assert os.listdir(tmp_path) == []
