# Example models built with the PettingZoo adapters (detsim_worker.adapters.pettingzoo): PettingZoo's
# rock-paper-scissors (pettingzoo.classic.rps_v2, parallel API) as a detsim environment, and two
# per-agent policies as detsim agents; examples/pettingzoo/rps.yaml runs them. Needs the extra:
# pip install './workers/python[pettingzoo]'. Not built-ins: a worker loads them only when launched with them.
from __future__ import annotations

import os

from .adapters.pettingzoo import ParallelEnvAdapter, PolicyAgentAdapter

NO_MOVE_YET = 3  # rps_v2 observes the opponent's last move (0 rock, 1 paper, 2 scissors), 3 before any


def rps_env(max_cycles: int = 10):
    """A fresh rps_v2 parallel env; pygame (imported by rps_v2) must not greet on the worker's stdout."""
    os.environ.setdefault('PYGAME_HIDE_SUPPORT_PROMPT', '1')
    import pettingzoo

    return pettingzoo.make('parallel', 'classic/rps-v2', num_actions=3, max_cycles=max_cycles)


class Rps(ParallelEnvAdapter):
    """rps_v2 with 10-round episodes; checkpoints by replay (rps_v2 is deterministic in its actions)."""

    def __init__(self):
        super().__init__(rps_env, model_version='pettingzoo-rps_v2-v1', action_decoder=int)


def random_move(observation, rng):
    return int(rng.integers(0, 3))


def beat_last_move(observation, rng):
    """Plays what beats the opponent's last move; random before the first one and one time in four."""
    if observation == NO_MOVE_YET or rng.random() < 0.25:
        return random_move(observation, rng)
    return (int(observation) + 1) % 3


class RandomPlayer(PolicyAgentAdapter):
    def __init__(self):
        super().__init__(random_move, model_version='rps-random-v1')


class BeatLastPlayer(PolicyAgentAdapter):
    def __init__(self):
        super().__init__(beat_last_move, model_version='rps-beat-last-v1')
