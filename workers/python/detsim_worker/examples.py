# Small example models written with the SDK (workers/python/README.md), runnable as
# `python:detsim_worker.examples:Coin`:
# what a Python model class looks like. Not built-ins: a worker loads them only when launched with them.
from __future__ import annotations

import numpy as np

from .sdk import AgentModel, Xorshift32, rng_seed


class Coin(AgentModel):
    """Flips a seeded coin per step: east or west; keeps a numpy history of the rewards it got."""

    model_version = 'coin-v1'

    def initialize(self, ctx):
        return {'rng': Xorshift32(rng_seed(ctx.seed)), 'rewards': np.zeros(0, dtype=np.float64)}

    def prepare(self, state, ctx):
        return {'move': 'east' if state['rng'].next_uint() % 2 else 'west'}

    def commit(self, state, ctx):
        state['rewards'] = np.append(state['rewards'], [r['value'] for r in ctx.rewards])

    def capture(self, state):
        return {'rewards': state['rewards'], 'rng': state['rng'].state}  # a numpy array as it is

    def restore(self, data, ctx):
        # A numpy array comes back a numpy array: the same dtype and shape, writable.
        return {'rng': Xorshift32(data['rng']), 'rewards': data['rewards']}
