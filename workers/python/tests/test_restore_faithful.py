# The Python built-in models' restore is faithful (issue #29): walker, lif and forage each run from
# their seed to step K with fixed inputs, are captured, and run on to K+N; a fresh instance restored
# from that capture (through the state codec, as the worker hands it over) gives the same outputs at
# steps K..K+N-1 and re-captures the same bytes at K+N, and the state at K is not the initial one (so
# a restore that re-initializes from the seed cannot pass by accident). The controls: each built-in
# subclassed here so that its restore re-initializes from the seed fails the same check naming the
# step, so does a lif whose restore zeroes its membrane, and a walker and a lif whose restore drops
# rewardTotal fail on the re-capture. Model calls only: no worker process, no gRPC, not the host's
# restore path (through real workers: test/cross-lang/restore-faithful.test.ts).
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from detsim_worker.canonical_json import canonicalize
from detsim_worker.capture_check import first_difference
from detsim_worker.models.forage import Forage, forage
from detsim_worker.models.lif import Lif, lif
from detsim_worker.models.walker import Walker, walker
from detsim_worker.sdk import (
    AgentCommitContext,
    AgentInitContext,
    AgentPrepareContext,
    EnvironmentAdvanceContext,
    EnvironmentInitContext,
)
from detsim_worker.state_codec import decode_state, encode_state

K = 12
N = 12
# lif with 200 neurons: at 64, 300 kicks a tick fire nearly every neuron every tick, so a lost membrane goes unseen.
LIF = {'neurons': 200}


@dataclass
class Subject:
    """A model under the check: start from the seed, restore decoded captured data, one step's outputs, capture."""

    start: Callable[[], Any]
    restore: Callable[[Any], Any]
    step: Callable[[Any, int], Any]
    capture: Callable[[Any], bytes]


def restore_faithfulness(m: Subject) -> tuple[bool, str | None]:
    """(the capture at K differs from the one at 0, the first divergence of the restored copy or None)."""
    live = m.start()
    initial = m.capture(live)
    for k in range(K):
        m.step(live, k)
    at_k = m.capture(live)
    expected = [canonicalize(m.step(live, k)) for k in range(K, K + N)]
    at_end = m.capture(live)
    copy = m.restore(decode_state(at_k))
    for k in range(K, K + N):
        got = canonicalize(m.step(copy, k))
        if got != expected[k - K]:
            return at_k != initial, (
                f'step {k}: the copy restored at {K} output {got}, the uninterrupted run {expected[k - K]}'
            )
    again = m.capture(copy)
    if again != at_end:
        where = first_difference(decode_state(again), decode_state(at_end))
        return at_k != initial, f"the re-capture at {K + N} differs from the uninterrupted run's at {where}"
    return at_k != initial, None


def obs_at(k: int) -> dict:
    """Observation at boundary k: food offsets that vary, and now and then none."""
    if k % 7 == 3:
        return {'x': 0, 'y': 0}
    return {'foodDx': (k * 7) % 9 - 4, 'foodDy': (k * 5) % 7 - 3, 'score': k, 'x': k % 5, 'y': k % 4}


def agent_subject(model: Any, seed: int, params: dict) -> Subject:
    ctx = AgentInitContext('a', seed, params, obs_at(0))

    def step(state: Any, k: int) -> Any:
        decision = model.prepare(state, AgentPrepareContext('a', k, 16 if k % 3 == 0 else 17, obs_at(k)))
        rewards = [{'eventId': f'r-{k}', 'ruleId': 'r', 'value': (k % 4) * 0.25}]
        model.commit(state, AgentCommitContext('a', k, obs_at(k + 1), rewards))
        return decision

    return Subject(
        start=lambda: model.initialize(ctx),
        restore=lambda data: model.restore(data, ctx),
        step=step,
        capture=lambda state: encode_state(model.capture(state)),
    )


PORTS = [{'portId': 'p0', 'agentId': 'a'}, {'portId': 'p1', 'agentId': 'b'}, {'portId': 'p2', 'agentId': 'c'}]
MOVES = ['north', 'east', 'south', 'west', 'stay']


def environment_subject(model: Any, seed: int, params: dict) -> Subject:
    ctx = EnvironmentInitContext('world', seed, params, PORTS, {'numerator': '1', 'denominator': '1'})

    def step(state: Any, k: int) -> Any:
        actions = [{**p, 'action': {'move': MOVES[(k * 7 + i * 3) % 5]}} for i, p in enumerate(PORTS)]
        outcome = model.advance(state, EnvironmentAdvanceContext(k, actions))
        return {'outcome': outcome, 'observations': model.observe(state), 'digest': model.digest(state)}

    return Subject(
        start=lambda: model.initialize(ctx),
        restore=lambda data: model.restore(data, ctx),
        step=step,
        capture=lambda state: encode_state(model.capture(state)),
    )


# The defect under test, in test code only: a restore that ignores the captured data and starts over from the seed.
class ReinitWalker(Walker):
    def restore(self, data, ctx):
        return self.initialize(ctx)


class ReinitLif(Lif):
    def restore(self, data, ctx):
        return self.initialize(ctx)


class ReinitForage(Forage):
    def restore(self, data, ctx):
        return self.initialize(ctx)


BUILT_INS = {
    'walker': (walker, ReinitWalker(), lambda m: agent_subject(m, -424242, {'explore': 3})),
    'lif': (lif, ReinitLif(), lambda m: agent_subject(m, 777, LIF)),
    'forage': (forage, ReinitForage(), lambda m: environment_subject(m, 31337, {'width': 7, 'height': 5, 'food': 6})),
}


@pytest.mark.parametrize('name', list(BUILT_INS))
def test_a_built_in_restored_from_its_capture_continues_as_the_uninterrupted_run(name):
    model, _, subject = BUILT_INS[name]
    assert restore_faithfulness(subject(model)) == (True, None)


@pytest.mark.parametrize('name', list(BUILT_INS))
def test_control_a_built_in_whose_restore_reinitializes_from_the_seed_fails_naming_the_step(name):
    _, reinit, subject = BUILT_INS[name]
    moved, divergence = restore_faithfulness(subject(reinit))
    assert moved
    found = re.match(rf'^step (\d+): the copy restored at {K} output .+, the uninterrupted run ', divergence or '')
    assert found, divergence
    assert K <= int(found.group(1)) < K + N


def test_control_a_walker_and_a_lif_whose_restore_drops_reward_total_fail_on_the_re_capture():
    # rewardTotal never steers a decision: only the byte-equal re-capture at K+N can see it lost.
    class DropTotalWalker(Walker):
        def restore(self, data, ctx):
            s = super().restore(data, ctx)
            s.reward_total = 0
            return s

    class DropTotalLif(Lif):
        def restore(self, data, ctx):
            s = super().restore(data, ctx)
            s.reward_total = 0
            return s

    for s in (agent_subject(DropTotalWalker(), -424242, {'explore': 3}), agent_subject(DropTotalLif(), 777, LIF)):
        assert restore_faithfulness(s) == (
            True,
            f"the re-capture at {K + N} differs from the uninterrupted run's at $.rewardTotal",
        )


def test_control_a_lif_whose_restore_zeroes_its_membrane_fails_naming_the_step():
    class ZeroMembraneLif(Lif):
        def restore(self, data, ctx):
            return super().restore({**data, 'membrane': bytes(LIF['neurons'] * 8)}, ctx)

    _, divergence = restore_faithfulness(agent_subject(ZeroMembraneLif(), 777, LIF))
    assert re.match(rf'^step {K}: the copy restored at {K} output .+, the uninterrupted run ', divergence or ''), (
        divergence
    )
