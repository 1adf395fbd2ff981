# Built-in agent `walker` (modelVersion walker-v1), bit for bit with workers/models/walker.ts:
# exactly one Xorshift32 draw per step; see the RULES there.
from __future__ import annotations

from ..params import walker_params
from ..scalars import is_int
from ..sdk import AgentModel, Xorshift32, rng_seed
from .moves import DIRECTIONS, food_offset


class WalkerState:
    __slots__ = ('rng', 'explore', 'reward_total')

    def __init__(self, rng: Xorshift32, explore: int, reward_total: float) -> None:
        self.rng = rng
        self.explore = explore
        self.reward_total = reward_total


class Walker(AgentModel):
    model_version = 'walker-v1'
    plasticity_version = 'none-v1'
    fork_params = ('explore',)  # read at every step: a fork may change it (workers/models/walker.ts)

    def resolve_params(self, params):
        return walker_params(params)

    def initialize(self, ctx):
        return WalkerState(Xorshift32(rng_seed(ctx.seed)), walker_params(ctx.params)['explore'], 0)

    def prepare(self, state, ctx):
        r = state.rng.next_uint()
        food = food_offset(ctx.observation)
        if food is None or r % state.explore == 0:
            move = DIRECTIONS[(r >> 3) % 4]
        else:
            dx, dy = food
            if dx == 0 and dy == 0:
                move = 'stay'
            elif abs(dx) >= abs(dy):
                move = 'east' if dx > 0 else 'west'
            else:
                move = 'south' if dy > 0 else 'north'
        return {'move': move}

    def commit(self, state, ctx):
        for r in ctx.rewards:
            state.reward_total += r['value']

    def capture(self, state):
        return {'rewardTotal': state.reward_total, 'rng': state.rng.state}

    def restore(self, data, ctx):
        total, rng_state = data.get('rewardTotal'), data.get('rng')
        if not isinstance(total, (int, float)) or isinstance(total, bool) or not is_int(rng_state):
            raise ValueError('walker payload: rewardTotal and rng must be numbers')
        rng = Xorshift32(int(rng_state))
        return WalkerState(rng, walker_params(ctx.params)['explore'], float(total))  # 0.0 comes back as 0


walker = Walker()
