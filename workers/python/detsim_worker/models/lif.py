# Built-in agent `lif` (modelVersion lif-v1), bit for bit with workers/models/lif.ts (IEEE-754
# f64, baseline rounded to f32): numpy does the per-neuron update with the same operations in the
# same order; np.add.at applies repeated kicks one after another, as the loop does.
from __future__ import annotations

import numpy as np

from ..params import lif_params
from ..sdk import AgentModel, Xorshift32, rng_seed
from .moves import DIRECTIONS, food_offset

LIF_KICKS_PER_TICK = 300


class LifState:
    __slots__ = ('n', 'rng', 'membrane', 'baseline', 'baseline64', 'reward_total')

    def __init__(self, n, rng, membrane, baseline, reward_total):
        self.n = n
        self.rng = rng
        self.membrane = membrane  # float64[n]
        self.baseline = baseline  # float32[n]
        self.baseline64 = baseline.astype(np.float64)
        self.reward_total = reward_total


def run_ticks(s: LifState, ticks: int, drive: np.ndarray, spikes: list[int]) -> None:
    n, rng, membrane = s.n, s.rng, s.membrane
    drive_per_neuron = np.resize(drive, n)  # drive[i & 3]
    for _ in range(ticks):
        kicks = np.fromiter(
            (rng.next_uint() % n for _ in range(LIF_KICKS_PER_TICK)), dtype=np.int64, count=LIF_KICKS_PER_TICK
        )
        np.add.at(membrane, kicks, 0.42)
        m = membrane * 0.9
        m += s.baseline64
        m += drive_per_neuron
        fired = m >= 1.0
        for d in range(4):
            spikes[d] += int(np.count_nonzero(fired[d::4]))
        m[fired] = 0.0
        membrane[:] = m


class Lif(AgentModel):
    model_version = 'lif-v1'
    plasticity_version = 'none-v1'

    def resolve_params(self, params):
        return lif_params(params)

    def initialize(self, ctx):
        n = lif_params(ctx.params)['neurons']
        rng = Xorshift32(rng_seed(ctx.seed))
        draws = np.fromiter((rng.next_f64() for _ in range(n)), dtype=np.float64, count=n)
        baseline = (draws * 0.06).astype(np.float32)  # Math.fround: round to nearest f32
        return LifState(n, rng, np.zeros(n, dtype=np.float64), baseline, 0)

    def prepare(self, state, ctx):
        drive = np.zeros(4, dtype=np.float64)
        food = food_offset(ctx.observation)
        if food is not None:
            dx, dy = food
            drive[:] = [
                0.05 if dy < 0 else 0.0,
                0.05 if dx > 0 else 0.0,
                0.05 if dy > 0 else 0.0,
                0.05 if dx < 0 else 0.0,
            ]
        spikes = [0, 0, 0, 0]
        run_ticks(state, ctx.ticks, drive, spikes)
        best = 0
        for d in range(1, 4):
            if spikes[d] > spikes[best]:
                best = d
        return {'move': 'stay' if spikes[best] == 0 else DIRECTIONS[best], 'spikes': spikes}

    def commit(self, state, ctx):
        for r in ctx.rewards:
            state.reward_total += r['value']

    def capture(self, state):
        return {
            'baseline': state.baseline.astype('<f4').tobytes(),
            'membrane': state.membrane.astype('<f8').tobytes(),
            'neurons': state.n,
            'rewardTotal': state.reward_total,
            'rng': state.rng.state,
        }

    def restore(self, data, ctx):
        n = lif_params(ctx.params)['neurons']
        if data.get('neurons') != n:
            raise ValueError(f'lif payload: neurons {data.get("neurons")} differs from params.neurons {n}')
        membrane, baseline = data.get('membrane'), data.get('baseline')
        if not isinstance(membrane, bytes) or len(membrane) != n * 8:
            raise ValueError('lif payload: membrane must be n * 8 bytes')
        if not isinstance(baseline, bytes) or len(baseline) != n * 4:
            raise ValueError('lif payload: baseline must be n * 4 bytes')
        total, rng_state = data.get('rewardTotal'), data.get('rng')
        if not isinstance(total, (int, float)) or isinstance(total, bool) or not isinstance(rng_state, (int, float)):
            raise ValueError('lif payload: rewardTotal and rng must be numbers')
        return LifState(
            n,
            Xorshift32(int(rng_state)),
            np.frombuffer(membrane, dtype='<f8').astype(np.float64),
            np.frombuffer(baseline, dtype='<f4').astype(np.float32),
            float(total),  # a float with an integral value comes back as an int
        )


lif = Lif()
