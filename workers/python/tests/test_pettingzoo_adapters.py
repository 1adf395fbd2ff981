# The PettingZoo adapters (detsim_worker.adapters.pettingzoo) on real PettingZoo envs: rps_v2 from
# PyPI through the replay state hooks, a small ParallelEnv subclass through user state hooks, the
# policy agent's rng checkpoint; every checkpoint goes through JSON (never pickle). Not the worker
# wire (test/cross-lang/pettingzoo-run.test.ts runs the example through `detsim run`).
import json
import math

import numpy as np
import pytest
from detsim_worker.adapters.pettingzoo import ParallelEnvAdapter, to_json_data
from detsim_worker.examples_pettingzoo import BeatLastPlayer, RandomPlayer, Rps
from detsim_worker.sdk import AgentInitContext, AgentPrepareContext, EnvironmentAdvanceContext, EnvironmentInitContext
from pettingzoo import ParallelEnv

PORTS = [{'portId': 'p0', 'agentId': 'alice'}, {'portId': 'p1', 'agentId': 'bob'}]


def env_ctx(seed=7):
    return EnvironmentInitContext('rps', seed, {}, PORTS, None)


def through_json(data):
    return json.loads(json.dumps(data))


def step_with(env, state, step, moves):
    actions = [{'portId': p['portId'], 'agentId': p['agentId'], 'action': {'action': m}} for p, m in zip(PORTS, moves)]
    return env.advance(state, EnvironmentAdvanceContext(step, actions))


def play(env, state, steps, start=0):
    """Steps `state` with a fixed move sequence; the per-step (observations, rewards, digest)."""
    out = []
    for step in range(start, start + steps):
        rewards = step_with(env, state, step, [step % 3, (step * step) % 3])
        out.append((env.observe(state), rewards, env.digest(state)))
    return out


def test_rps_replay_checkpoint_resumes_across_episode_ends():
    env = Rps()
    whole = env.initialize(env_ctx(seed=-7))
    expected = play(env, whole, 25)
    assert expected[-1][2]['episode'] == 2  # 10-round episodes: two ended and a third began
    part = env.initialize(env_ctx(seed=-7))
    play(env, part, 13)
    payload = through_json(env.capture(part))
    assert payload['replay']['episode'] == 1 and len(payload['replay']['actions']) == 3
    resumed = env.restore(payload, env_ctx(seed=-7))
    assert play(env, resumed, 12, start=13) == expected[13:]


def test_rps_observations_and_rewards_are_json_data_mapped_in_port_order():
    env = Rps()
    s = env.initialize(env_ctx())
    assert env.observe(s) == {
        'alice': {'observation': 3, 'reward': 0, 'done': False},
        'bob': {'observation': 3, 'reward': 0, 'done': False},
    }
    outcome = step_with(env, s, 0, [1, 0])  # alice (player_0) paper beats bob (player_1) rock
    assert outcome['rewards'] == [
        {'agentId': 'alice', 'eventId': 'reward-0-alice', 'ruleId': 'reward', 'value': 1},
        {'agentId': 'bob', 'eventId': 'reward-0-bob', 'ruleId': 'reward', 'value': -1},
    ]
    assert env.observe(s)['alice']['observation'] == 0 and env.observe(s)['bob']['observation'] == 1
    missing = 'actions[p0].action: missing (a PettingZoo action travels as {"action": value})'
    assert env.check_action({'move': 1}, 'p0') == missing
    assert env.check_action({'action': 1, 'x': 2}, 'p0') == 'actions[p0]: unknown field "x"'


class Counter(ParallelEnv):
    """A ParallelEnv whose agents add their actions to a shared total; its state is the total."""

    metadata = {'name': 'counter_v0'}

    def __init__(self):
        self.possible_agents = ['a', 'b']
        self.total = 0

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.total = seed % 5
        return {a: np.array([self.total]) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.total += sum(actions.values())
        obs = {a: np.array([self.total]) for a in self.agents}
        return (
            obs,
            {a: np.float64(0.5) for a in self.agents},
            {a: False for a in self.agents},
            {a: False for a in self.agents},
            {a: {} for a in self.agents},
        )


def test_user_state_hooks_capture_and_restore_without_replay():
    captured = []
    env = ParallelEnvAdapter(
        Counter,
        model_version='counter-v0',
        capture_state=lambda e: captured.append(e.total) or {'total': e.total},
        restore_state=lambda e, d: setattr(e, 'total', d['total']),
    )
    s = env.initialize(env_ctx(seed=12))
    play(env, s, 4)
    payload = through_json(env.capture(s))
    assert payload['env'] == {'total': captured[-1]} and 'replay' not in payload
    expected = play(env, s, 3, start=4)
    assert play(env, env.restore(payload, env_ctx(seed=12)), 3, start=4) == expected
    assert expected[0][0]['alice'] == {'observation': [captured[-1] + 4 % 3 + 16 % 3], 'reward': 0.5, 'done': False}
    with pytest.raises(ValueError, match='give both capture_state and restore_state'):
        ParallelEnvAdapter(Counter, model_version='x', capture_state=lambda e: 0)


def test_ports_must_match_the_env_agents():
    with pytest.raises(ValueError, match=r'ports: the env has 2 agents \(player_0, player_1\); the run configures 1'):
        Rps().initialize(EnvironmentInitContext('rps', 1, {}, PORTS[:1], None))


@pytest.mark.parametrize('player', [RandomPlayer, BeatLastPlayer])
def test_policy_rng_checkpoint_through_json_repeats_the_decisions(player):
    agent = player()
    state = agent.initialize(AgentInitContext('alice', -99, {}, {}))  # detsim seeds are signed 32-bit

    def decide(st, step, obs):
        return agent.prepare(st, AgentPrepareContext('alice', step, 1, {'observation': obs}))

    [decide(state, i, i % 4) for i in range(5)]
    payload = through_json(agent.capture(state))
    expected = [decide(state, i, i % 4) for i in range(5, 30)]
    restored = agent.restore(payload, AgentInitContext('alice', 99, {}, {}))
    assert [decide(restored, i, i % 4) for i in range(5, 30)] == expected
    assert {d['action'] for d in expected} == {0, 1, 2}


def test_json_data_converts_numpy_and_refuses_non_finite_numbers():
    data = {'x': np.arange(3), 'y': (np.float32(1.5), np.int64(2))}
    assert to_json_data(data, 'obs') == {'x': [0, 1, 2], 'y': [1.5, 2]}
    with pytest.raises(ValueError, match=r'obs\[1\]: nan is not a finite number'):
        to_json_data(np.array([1.0, math.nan]), 'obs')
    with pytest.raises(ValueError, match='obs: a object is not JSON data'):
        to_json_data(object(), 'obs')


def test_env_params_are_the_factorys_arguments_or_refused_by_name():
    from detsim_worker.adapters.pettingzoo import ParallelEnvAdapter
    from detsim_worker.params import ParamError

    def no_args():
        raise AssertionError('never called')

    def sized(size=3, *, mode='a'):
        raise AssertionError('never called')

    with pytest.raises(ParamError, match=r'params: unknown field "food" \(allowed: none\)'):
        ParallelEnvAdapter(no_args, model_version='x').resolve_params({'food': 12})
    assert ParallelEnvAdapter(sized, model_version='x').resolve_params({'size': 5, 'mode': 'b'}) == {
        'size': 5,
        'mode': 'b',
    }
    with pytest.raises(ParamError, match=r'unknown field "sise"'):
        ParallelEnvAdapter(sized, model_version='x').resolve_params({'sise': 5})
    assert ParallelEnvAdapter(lambda **kw: None, model_version='x').resolve_params({'any': 1}) == {'any': 1}
