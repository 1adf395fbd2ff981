# Adapters that run a PettingZoo ParallelEnv as a detsim environment model (ParallelEnvAdapter) and
# a per-agent policy callable as a detsim agent model (PolicyAgentAdapter), with explicit state
# hooks: a checkpoint holds JSON data the adapter or its user chose, never a pickle. Not PettingZoo
# itself (this module imports nothing from it: it drives whatever object the factory returns) and
# not the runtime (the worker still owns ticks, epochs, capture payloads and the wire).
#
# Mapping. The i-th detsim port (config order) drives env.possible_agents[i]; a detsim action is
# {"action": <JSON value>} and reaches env.step as action_decoder(value) (default: the value
# itself). A detsim observation is {"observation": <obs as JSON>, "reward": <last reward>,
# "done": <terminated or truncated>}: numpy arrays become lists, numpy scalars Python numbers, and a
# non-finite float is refused (detsim data is finite JSON). Rewards travel as detsim rewards with
# ruleId "reward", one per agent per step whose reward is not zero.
#
# Episodes. env.reset(seed=unsigned detsim seed + episode) starts episode 0; when env.agents is empty after
# a step (every agent terminated or truncated), the next advance first resets with episode + 1.
#
# State. A ParallelEnv has no state API, so the user says how to capture it: either hooks
# capture_state(env) -> JSON data and restore_state(env, data) (after a reset), or, for an env
# that is deterministic given its reset seed and actions, the default ReplayState: the checkpoint
# holds the episode number and this episode's actions, and restore resets and re-steps them.
from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import numpy as np

from ..params import only_params
from ..sdk import AgentModel, EnvironmentModel, restore_rng, rng_state

ParallelEnvFactory = Callable[..., Any]
Policy = Callable[[Any, np.random.Generator], Any]


def factory_params(factory: Callable[..., Any]) -> list[str] | None:
    """The keyword arguments `factory` takes (None: any, it has **kwargs)."""
    parameters = inspect.signature(factory).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in parameters if p.kind in kinds]


def unsigned_seed(seed: int) -> int:
    """A detsim seed is a signed 32-bit integer; numpy and PettingZoo take its unsigned bits."""
    return seed & 0xFFFFFFFF


def to_json_data(value: Any, where: str) -> Any:
    """numpy arrays and scalars, tuples and dicts as JSON data; a non-finite float is refused, naming `where`."""
    if isinstance(value, np.ndarray):
        return to_json_data(value.tolist(), where)
    if isinstance(value, np.generic):
        return to_json_data(value.item(), where)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f'{where}: {value} is not a finite number')
        return value
    if isinstance(value, (list, tuple)):
        return [to_json_data(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): to_json_data(v, f'{where}.{k}') for k, v in value.items()}
    raise ValueError(f'{where}: a {type(value).__name__} is not JSON data')


class ReplayState:
    """The default, pickle-free state hooks for an env deterministic given (reset seed, actions)."""

    @staticmethod
    def capture(episode: int, history: list) -> dict:
        return {'episode': episode, 'actions': history}


class _EnvState:
    """The live env plus what the adapter needs to continue and capture it."""

    __slots__ = ('env', 'port_agents', 'seed', 'episode', 'history', 'last')

    def __init__(self, env: Any, port_agents: dict, seed: int):
        self.env = env
        self.port_agents = port_agents  # detsim agentId -> PettingZoo agent, in port order
        self.seed = seed
        self.episode = 0
        self.history: list = []  # this episode's joint actions, as JSON data (ReplayState's payload)
        self.last: dict = {}  # agentId -> observation dict


class ParallelEnvAdapter(EnvironmentModel):
    """A detsim environment running a PettingZoo ParallelEnv made by `factory`; see the module comment."""

    def __init__(
        self,
        factory: ParallelEnvFactory,
        *,
        model_version: str,
        capture_state: Callable[[Any], Any] | None = None,
        restore_state: Callable[[Any, Any], None] | None = None,
        action_decoder: Callable[[Any], Any] = lambda v: v,
    ):
        if (capture_state is None) != (restore_state is None):
            raise ValueError('ParallelEnvAdapter: give both capture_state and restore_state, or neither (replay)')
        self.factory = factory
        self.model_version = model_version
        self.capture_state = capture_state
        self.restore_state = restore_state
        self.action_decoder = action_decoder

    # --- lifecycle -------------------------------------------------------------------------
    def resolve_params(self, params: dict) -> dict:
        """The env's params are the factory's keyword arguments: a param it does not take is refused,
        naming it (a factory that takes none accepts no params), so a sweep over params is never ignored."""
        only_params(params, factory_params(self.factory))
        return params

    def initialize(self, ctx):
        s = self._fresh(ctx)
        self._reset(s)
        return s

    def _fresh(self, ctx) -> _EnvState:
        env = self.factory(**ctx.params)
        possible = list(env.possible_agents)
        if len(ctx.ports) != len(possible):
            raise ValueError(
                f'ports: the env has {len(possible)} agents ({", ".join(possible)}); '
                f'the run configures {len(ctx.ports)}'
            )
        return _EnvState(env, {p['agentId']: possible[i] for i, p in enumerate(ctx.ports)}, unsigned_seed(ctx.seed))

    def _reset(self, s: _EnvState) -> None:
        obs, _ = s.env.reset(seed=s.seed + s.episode)
        s.history = []
        s.last = {aid: self._observation(obs, {}, {}, pz) for aid, pz in s.port_agents.items()}

    def _observation(self, obs: dict, rewards: dict, done: dict, pz: str) -> dict:
        return {
            'observation': to_json_data(obs.get(pz), f'observation of {pz}'),
            'reward': to_json_data(rewards.get(pz, 0), f'reward of {pz}'),
            'done': bool(done.get(pz, False)),
        }

    def check_action(self, action, port_id):
        extra = sorted(k for k in action if k != 'action')
        if 'action' not in action:
            return f'actions[{port_id}].action: missing (a PettingZoo action travels as {{"action": value}})'
        return f'actions[{port_id}]: unknown field "{extra[0]}"' if extra else None

    def advance(self, s, ctx):
        if not s.env.agents:  # the previous episode ended: the next begins, seeded by its number
            s.episode += 1
            self._reset(s)
        joint = [a['action']['action'] for a in ctx.actions]
        self._step(s, joint)
        rewards, event_ids = [], []
        for a in ctx.actions:
            value = s.last[a['agentId']]['reward']
            if value != 0:
                event_id = f'reward-{ctx.step}-{a["agentId"]}'
                rewards.append({'agentId': a['agentId'], 'eventId': event_id, 'ruleId': 'reward', 'value': value})
                event_ids.append(event_id)
        return {'rewards': rewards, 'eventIds': event_ids}

    def _step(self, s: _EnvState, joint: list) -> None:
        live = set(s.env.agents)
        actions = {pz: self.action_decoder(joint[i]) for i, pz in enumerate(s.port_agents.values()) if pz in live}
        obs, rewards, terminated, truncated, _ = s.env.step(actions)
        done = {pz: terminated.get(pz, False) or truncated.get(pz, False) for pz in s.port_agents.values()}
        s.history.append(joint)
        s.last = {aid: self._observation(obs, rewards, done, pz) for aid, pz in s.port_agents.items()}

    def observe(self, s):
        return dict(s.last)

    def digest(self, s):
        return {'episode': s.episode, 'steps': len(s.history), 'last': s.last}

    # --- state hooks -----------------------------------------------------------------------
    def capture(self, s):
        if self.capture_state is None:
            return {'replay': ReplayState.capture(s.episode, [list(j) for j in s.history]), 'last': s.last}
        return {'episode': s.episode, 'env': self.capture_state(s.env), 'last': s.last, 'steps': len(s.history)}

    def restore(self, data, ctx):
        s = self._fresh(ctx)
        if self.capture_state is None:
            replay = data['replay']
            s.episode = int(replay['episode'])
            self._reset(s)
            for joint in replay['actions']:
                self._step(s, list(joint))
        else:
            s.episode = int(data['episode'])
            s.env.reset(seed=s.seed + s.episode)
            self.restore_state(s.env, data['env'])
            s.history = [None] * int(data['steps'])
        s.last = data['last']
        return s


def _rng_from_capture(data: Any) -> np.random.Generator:
    """The policy rng from its capture: rng_state's plain data, or (checkpoints written before the SDK
    had rng_state) the same dict with its integers as decimal strings."""

    def dec(v):
        if isinstance(v, dict):
            return {k: dec(x) for k, x in v.items()}
        return int(v) if isinstance(v, str) and v.lstrip('-').isdigit() else v

    return restore_rng(dec(data), 'state.rng')


class PolicyAgentAdapter(AgentModel):
    """A detsim agent calling `policy(observation, rng) -> action` each step; its only state is the rng.

    rng is ctx.numpy_rng() (PCG64 seeded with the unsigned detsim seed); the checkpoint is
    sdk.rng_state(rng), kept exactly by the state codec. The decision is {"action": policy(...)} as JSON data."""

    def __init__(self, policy: Policy, *, model_version: str):
        self.policy = policy
        self.model_version = model_version

    def initialize(self, ctx):
        return {'rng': ctx.numpy_rng()}

    def prepare(self, state, ctx):
        observation = ctx.observation.get('observation')
        return {'action': to_json_data(self.policy(observation, state['rng']), f'{ctx.agent_id} action')}

    def commit(self, state, ctx):
        return None

    def capture(self, state):
        return {'rng': rng_state(state['rng'])}

    def restore(self, data, ctx):
        return {'rng': _rng_from_capture(data['rng'])}
