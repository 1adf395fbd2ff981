# The Python model SDK, mirroring workers/sdk.ts: an agent model is a class with initialize,
# prepare, commit, capture, restore; an environment model a class with initialize, advance,
# observe, digest, capture, restore (and optionally check_action). The runtime owns ticks,
# idempotency, epochs, capture payloads and the wire. Not the runtime (runtime.py).
#
# State payloads: capture() returns plain data (None, bool, int of any size, float, str, bytes, list,
# dict with str keys, numpy arrays); restore() gets exactly that back (numpy arrays with their dtype
# and shape, writable), except that a float with an integral value in the 32-bit range comes back as
# an int, as JavaScript holds it (docs/spec/state-codec.md). A numpy Generator is captured with
# rng_state(gen) and rebuilt with restore_rng(data).
#
# Seeds: ctx.seed is the agent's derived seed as seed-derivation-v1 defines it, a signed 32-bit
# integer (it may be negative). ctx.seed_u32 is the same 32 bits unsigned, and ctx.numpy_rng() a
# numpy Generator on PCG64 seeded with seed_u32.
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .params import DECLARE_PARAMS_HINT, ParamError, int_param, only_params  # noqa: F401  (re-exported for model authors)
from .xorshift import Xorshift32  # noqa: F401

NO_DATASET_DIGEST = hashlib.sha256(b'detsim/no-dataset-v1').hexdigest()
ONE_MS = {'numerator': '1000000', 'denominator': '1'}
ZERO_SEED_SUBSTITUTE = 0x2545F491


def rng_seed(seed: int) -> int:
    """Seed 0 would lock Xorshift32 at 0 forever: the built-in models substitute this constant."""
    return ZERO_SEED_SUBSTITUTE if seed == 0 else seed


def rng_state(gen: Any) -> dict:
    """A numpy Generator's state as plain data the state codec keeps exactly (its bit generator's name
    and state; PCG64's 128-bit integers stay integers). Capture it; rebuild with restore_rng."""
    import numpy as np

    if not isinstance(gen, np.random.Generator):
        raise TypeError(f'rng_state: a numpy.random.Generator is expected, not {type(gen).__name__}')
    return gen.bit_generator.state


def restore_rng(data: Any, field: str = 'rng') -> Any:
    """The numpy Generator whose state rng_state returned, drawing exactly as the captured one would.
    A state that does not fit (an unknown bit generator, a float where an int must be) is refused,
    naming `field`."""
    import numpy as np

    name = data.get('bit_generator') if isinstance(data, dict) else None
    bit_generator = getattr(np.random, name, None) if isinstance(name, str) else None
    if (
        bit_generator is None
        or not isinstance(bit_generator, type)
        or not issubclass(bit_generator, np.random.BitGenerator)
    ):
        raise ValueError(f'{field}.bit_generator: {name!r} is not a numpy bit generator')
    _refuse_floats(data, field)
    bits = bit_generator()
    try:
        bits.state = data
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f'{field}: not a {name} state: {e}') from None
    return np.random.Generator(bits)


def _refuse_floats(value: Any, field: str) -> None:
    if isinstance(value, dict):
        for key, v in value.items():
            _refuse_floats(v, f'{field}.{key}')
    elif isinstance(value, float):
        raise ValueError(
            f'{field}: {value!r} is a float where the bit generator state holds an integer (a lossy capture?)'
        )


def set_rng_state(gen: Any, data: Any, field: str = 'rng') -> None:
    """Put the state rng_state returned into an existing Generator (same checks as restore_rng)."""
    gen.bit_generator.state = restore_rng(data, field).bit_generator.state


class _Seeded:
    seed: int

    @property
    def seed_u32(self) -> int:
        """ctx.seed's 32 bits as an unsigned integer (0 .. 2^32-1): what numpy and most libraries take."""
        return self.seed & 0xFFFFFFFF

    def numpy_rng(self) -> Any:
        """A numpy Generator on PCG64 seeded with seed_u32; capture it with rng_state, rebuild with restore_rng."""
        import numpy as np

        return np.random.Generator(np.random.PCG64(self.seed_u32))


@dataclass
class AgentInitContext(_Seeded):
    """What initialize (and restore) get. seed: the derived seed, a signed 32-bit integer (seed-derivation-v1);
    seed_u32 / numpy_rng() for libraries that want a non-negative seed."""

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
class EnvironmentInitContext(_Seeded):
    """What initialize (and restore) get; seed as in AgentInitContext (signed 32-bit; seed_u32, numpy_rng())."""

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
    # The params this model reads; any other is refused, naming it (a model that declares none takes none).
    accepted_params: tuple = ()
    # The (resolved) params a fork may change when it restores this model's state: restore() then gets the
    # new ones in ctx.params. A param not listed (none by default) refuses the fork, naming it (workers/sdk.ts).
    fork_params: tuple = ()

    def resolve_params(self, params: dict) -> dict:
        """Check params and fill defaults; the result is what the profile digest covers. The default
        refuses any param not in accepted_params: override it to validate values too."""
        only_params(params, list(self.accepted_params), None if self.accepted_params else DECLARE_PARAMS_HINT)
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
    # The params this model reads; any other is refused, naming it (a model that declares none takes none).
    accepted_params: tuple = ()
    # As for agents; the restored environment must observe the boundary as the checkpoint recorded it.
    fork_params: tuple = ()

    def resolve_params(self, params: dict) -> dict:
        """As AgentModel.resolve_params: refuses any param not in accepted_params."""
        only_params(params, list(self.accepted_params), None if self.accepted_params else DECLARE_PARAMS_HINT)
        return params

    def check_action(self, action: dict, port_id: str) -> str | None:
        return None

    def initialize(self, ctx: EnvironmentInitContext) -> Any:
        """The world at boundary 0 from ctx.seed, ctx.params and ctx.ports ([{'portId', 'agentId'}], in the
        order actions are applied); what observe(state) returns then is each agent's first observation."""
        raise NotImplementedError

    def advance(self, state: Any, ctx: EnvironmentAdvanceContext) -> dict:
        """Apply ctx.actions ([{'portId', 'agentId', 'action'}], port order) for step ctx.step, changing state
        in place; return {'rewards': [{'agentId', 'eventId', 'ruleId', 'value'}], 'eventIds': [...]}: the
        rewards of the step (value a finite number) and the ids of its events in the order they happened
        (unique within the step; every reward's eventId among them)."""
        raise NotImplementedError

    def observe(self, state: Any) -> dict:
        """Every agent's observation at the current boundary: {agentId: {...JSON...}}, one per agent."""
        raise NotImplementedError

    def digest(self, state: Any) -> Any:
        """A small JSON value that determines the world state (its canonical SHA-256 is the step's worldDigest)."""
        raise NotImplementedError

    def capture(self, state: Any) -> Any:
        raise NotImplementedError

    def restore(self, data: Any, ctx: EnvironmentInitContext) -> Any:
        raise NotImplementedError
