# The Python model SDK, mirroring workers/sdk.ts: an agent model is a class with initialize,
# prepare, commit, capture, restore; an environment model a class with initialize, advance,
# observe, digest, capture, restore (and optionally check_action). The runtime owns ticks,
# idempotency, epochs, capture payloads and the wire. Not the runtime (runtime.py).
#
# State payloads: capture() returns plain data (None, bool, int, float, str, bytes, list, dict with
# str keys). A numpy array is stored as its raw little-endian bytes in C order (no dtype header);
# restore() gets bytes back and rebuilds the array with numpy.frombuffer(data, '<f8') etc.
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .params import ParamError, int_param, only_params  # noqa: F401  (re-exported for model authors)
from .xorshift import Xorshift32  # noqa: F401

NO_DATASET_DIGEST = hashlib.sha256(b'detsim/no-dataset-v1').hexdigest()
ONE_MS = {'numerator': '1000000', 'denominator': '1'}
ZERO_SEED_SUBSTITUTE = 0x2545F491


def rng_seed(seed: int) -> int:
    """Seed 0 would lock Xorshift32 at 0 forever: the built-in models substitute this constant."""
    return ZERO_SEED_SUBSTITUTE if seed == 0 else seed


@dataclass
class AgentInitContext:
    agent_id: str
    seed: int
    params: dict
    observation: dict


@dataclass
class AgentPrepareContext:
    agent_id: str
    step: int
    ticks: int
    observation: dict


@dataclass
class AgentCommitContext:
    agent_id: str
    step: int
    observation: dict
    rewards: list = field(default_factory=list)  # [{eventId, ruleId, value}]


@dataclass
class EnvironmentInitContext:
    environment_id: str
    seed: int
    params: dict
    ports: list  # [{portId, agentId}] in port order
    step_duration: dict


@dataclass
class EnvironmentAdvanceContext:
    step: int
    actions: list  # [{portId, agentId, action}] in port order


class AgentModel:
    """Base class for an agent model; override the callbacks. Deterministic functions of (state, ctx) only."""

    kind = 'agent'
    model_version = 'unversioned'
    plasticity_version = 'none-v1'
    dataset_digest = NO_DATASET_DIGEST
    tick_duration = ONE_MS

    def resolve_params(self, params: dict) -> dict:
        return params

    def initialize(self, ctx: AgentInitContext) -> Any:
        raise NotImplementedError

    def prepare(self, state: Any, ctx: AgentPrepareContext) -> dict:
        """Run ctx.ticks ticks and return the decision. It may change this agent's state, never another's
        (strict mode refuses a prepare that changed another agent's state: prepare_guard.py)."""
        raise NotImplementedError

    def commit(self, state: Any, ctx: AgentCommitContext) -> None:
        raise NotImplementedError

    def capture(self, state: Any) -> Any:
        raise NotImplementedError

    def restore(self, data: Any, ctx: AgentInitContext) -> Any:
        raise NotImplementedError


class EnvironmentModel:
    """Base class for an environment model; `advance` returns {rewards, eventIds}."""

    kind = 'environment'
    model_version = 'unversioned'

    def resolve_params(self, params: dict) -> dict:
        return params

    def check_action(self, action: dict, port_id: str) -> str | None:
        return None

    def initialize(self, ctx: EnvironmentInitContext) -> Any:
        raise NotImplementedError

    def advance(self, state: Any, ctx: EnvironmentAdvanceContext) -> dict:
        raise NotImplementedError

    def observe(self, state: Any) -> dict:
        raise NotImplementedError

    def digest(self, state: Any) -> Any:
        raise NotImplementedError

    def capture(self, state: Any) -> Any:
        raise NotImplementedError

    def restore(self, data: Any, ctx: EnvironmentInitContext) -> Any:
        raise NotImplementedError
