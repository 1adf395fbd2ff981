# Gymnasium peer of detsim's lockstep walker-on-forage step: a seeded random walk on a W x H torus
# with food, N subprocess copies under gymnasium.vector.AsyncVectorEnv; prints one JSON line.
# Not a detsim model and not a detsim measurement: only the peer's env-steps/s, timed here.
import argparse
import json
import platform
import sys
import time

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv

MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))  # N, E, S, W: one action per step, as a walker moves


class Xorshift32:
    """The same generator as detsim's walker (13/17/5 shifts on a 32-bit state), so the policy
    draws one integer per step exactly as the walker does."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFF

    def next_uint(self) -> int:
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x


class TorusWalk(gymnasium.Env):
    """One agent on a W x H torus with food cells; a step moves it one cell, eats food there
    (reward 1) and regrows the food elsewhere from the env's own seeded generator."""

    metadata = {"render_modes": []}

    def __init__(self, width: int, height: int, food: int) -> None:
        self.width, self.height, self.food_count = width, height, food
        self.observation_space = spaces.MultiDiscrete([width, height])
        self.action_space = spaces.Discrete(4)
        self.pos = (0, 0)
        self.food: set[tuple[int, int]] = set()

    def _random_cell(self) -> tuple[int, int]:
        return (int(self.np_random.integers(self.width)), int(self.np_random.integers(self.height)))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self._random_cell()
        self.food = set()
        while len(self.food) < min(self.food_count, self.width * self.height - 1):
            cell = self._random_cell()
            if cell != self.pos:
                self.food.add(cell)
        return np.array(self.pos, dtype=np.int64), {}

    def step(self, action):
        dx, dy = MOVES[int(action)]
        self.pos = ((self.pos[0] + dx) % self.width, (self.pos[1] + dy) % self.height)
        reward = 0.0
        if self.pos in self.food:
            self.food.discard(self.pos)
            self.food.add(self._random_cell())
            reward = 1.0
        return np.array(self.pos, dtype=np.int64), reward, False, False, {}


def make_env(width: int, height: int, food: int):
    return lambda: TorusWalk(width, height, food)


def measure(n: int, args) -> dict:
    envs = AsyncVectorEnv([make_env(args.width, args.height, args.food) for _ in range(n)])
    try:
        envs.reset(seed=[args.seed + i for i in range(n)])
        policies = [Xorshift32(args.seed * 7919 + i + 1) for i in range(n)]

        def run(steps: int) -> float:
            total = 0.0
            for _ in range(steps):
                actions = np.fromiter((p.next_uint() & 3 for p in policies), dtype=np.int64, count=n)
                _, rewards, _, _, _ = envs.step(actions)
                total += float(rewards.sum())
            return total

        run(args.warmup)
        start = time.perf_counter()
        eaten = run(args.steps)
        seconds = time.perf_counter() - start
    finally:
        envs.close()
    return {
        "n": n,
        "processes": n,
        "steps": args.steps,
        "warmupSteps": args.warmup,
        "seconds": seconds,
        "envStepsPerSec": args.steps * n / seconds,
        "foodEaten": eaten,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, action="append", required=True, help="vector size; repeat")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--height", type=int, default=32)
    parser.add_argument("--food", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    results = [measure(n, args) for n in args.n]
    print(json.dumps({
        "peer": "gymnasium.vector.AsyncVectorEnv",
        "versions": {"gymnasium": gymnasium.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "env": {"width": args.width, "height": args.height, "food": args.food, "seed": args.seed},
        "results": results,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
