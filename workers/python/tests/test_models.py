# The Python built-in models against test/workers/vectors/models-v1.json, the reference vectors the
# TypeScript and Rust models reproduce: every recorded decision, reward and world digest, bit for bit.
# The tick clock refuses to leave U64. Not the protocol (test_protocol.py).
import hashlib
import json
from pathlib import Path

import pytest
from detsim_worker.canonical_json import canonical_digest
from detsim_worker.models.forage import forage
from detsim_worker.models.lif import lif
from detsim_worker.models.walker import walker
from detsim_worker.scalars import U64_MAX, RationalNs
from detsim_worker.sdk import (
    AgentCommitContext,
    AgentInitContext,
    AgentPrepareContext,
    EnvironmentAdvanceContext,
    EnvironmentInitContext,
)
from detsim_worker.state_codec import decode_state, encode_state
from detsim_worker.tick_clock import TickClock

REPO_ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((REPO_ROOT / 'test' / 'workers' / 'vectors' / 'models-v1.json').read_text('utf-8'))


def test_walker_decisions_match_the_vectors():
    v = VECTORS['walker']
    s = walker.initialize(AgentInitContext('w', v['seed'], v['params'], {}))
    for k, step in enumerate(v['steps']):
        got = walker.prepare(s, AgentPrepareContext('w', k, 16, step['observation']))
        assert got == step['decision'], f'step {k}'


def test_lif_decisions_rng_and_membrane_match_the_vectors():
    v = VECTORS['lif']
    s = lif.initialize(AgentInitContext('l', v['seed'], v['params'], {}))
    for k, step in enumerate(v['steps']):
        got = lif.prepare(s, AgentPrepareContext('l', k, step['ticks'], step['observation']))
        assert got == step['decision'], f'step {k}'
    captured = lif.capture(s)
    assert captured['rng'] == v['after']['rngState']
    assert hashlib.sha256(captured['membrane']).hexdigest() == v['after']['membraneF64LeSha256']


def test_forage_observations_rewards_and_world_digests_match_the_vectors():
    v = VECTORS['forage']
    ctx = EnvironmentInitContext('env', v['seed'], v['params'], v['ports'], {'numerator': '1', 'denominator': '1'})
    s = forage.initialize(ctx)
    assert forage.observe(s) == v['initialObservations']
    for k, step in enumerate(v['steps']):
        actions = [
            {'portId': p['portId'], 'agentId': p['agentId'], 'action': {'move': m}}
            for p, m in zip(v['ports'], step['moves'])
        ]
        out = forage.advance(s, EnvironmentAdvanceContext(k, actions))
        assert out['rewards'] == step['rewards'], f'step {k}'
        assert canonical_digest(forage.digest(s)) == step['worldDigest'], f'step {k}'


def test_capture_restore_round_trips_continue_identically():
    v = VECTORS['lif']
    init = AgentInitContext('l', v['seed'], v['params'], {})
    a = lif.initialize(init)
    steps = v['steps']
    for k in range(3):
        lif.prepare(a, AgentPrepareContext('l', k, steps[k]['ticks'], steps[k]['observation']))
    lif.commit(a, AgentCommitContext('l', 2, {}, [{'eventId': 'e', 'ruleId': 'r', 'value': 0.5}]))
    b = lif.restore(decode_state(encode_state(lif.capture(a))), init)
    for k in range(3, 8):
        ctx = AgentPrepareContext('l', k, steps[k]['ticks'], steps[k]['observation'])
        assert lif.prepare(b, ctx) == lif.prepare(a, ctx) == steps[k]['decision']
    assert encode_state(lif.capture(a)) == encode_state(lif.capture(b))


def test_state_codec_writes_msgpackr_bytes():
    # Integer-valued floats are ints (JavaScript has one number type); others float64; keys sorted.
    assert encode_state({'b': 1.0, 'a': -1, 'c': 0.5}) == bytes.fromhex('83a161ffa16201a163cb3fe0000000000000')
    # A float beyond 32 bits is float64 as JavaScript writes it; a Python int beyond 32 bits stays an
    # int (int64), never a float (docs/spec/state-codec.md).
    assert encode_state(2.0**32) == bytes.fromhex('cb41f0000000000000')
    assert encode_state(2**32) == bytes.fromhex('d30000000100000000')
    assert encode_state(b'\x01\x02') == bytes.fromhex('c4020102')
    assert encode_state('x' * 40)[:2] == bytes.fromhex('d928')


def test_tick_clock_refuses_to_leave_u64_and_keeps_its_state():
    one_ns = RationalNs(1, 1)
    total = TickClock(one_ns, one_ns, RationalNs(0, 1), U64_MAX)
    with pytest.raises(OverflowError, match='brainTicks beyond U64'):
        total.advance()
    assert total.brain_ticks == U64_MAX
    # 2^64 ticks in one step: 2^40 ns steps of 2^-24 ns ticks.
    step = TickClock(RationalNs(2**40, 1), RationalNs(1, 2**24))
    with pytest.raises(OverflowError, match='ticks beyond U64'):
        step.advance()
    assert step.brain_ticks == 0 and step.remainder.to_json() == {'numerator': '0', 'denominator': '1'}
