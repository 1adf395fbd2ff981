# Gymnasium peer of detsim's lockstep walker-on-forage step: forage-v1's seeded torus with food and
# walker-v1's one-draw policy, N copies under gymnasium.vector.AsyncVectorEnv (one subprocess each)
# or SyncVectorEnv (all in this process), policy in the main process as researchers run it; prints
# one JSON line with env-steps/s per (N, vector).
# Not a detsim model and not a detsim measurement: only the peer's env-steps/s, timed here.
import argparse
import bisect
import json
import platform
import sys
import time

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

# forage-v1's moves and walker-v1's direction order (workers/models/moves.ts): y points down.
MOVE_DX = {'stay': 0, 'north': 0, 'east': 1, 'south': 0, 'west': -1}
MOVE_DY = {'stay': 0, 'north': -1, 'east': 0, 'south': 1, 'west': 0}
DIRECTIONS = ('north', 'east', 'south', 'west')
ACTIONS = ('stay',) + DIRECTIONS  # the Discrete(5) action index
ZERO_SEED_SUBSTITUTE = 0x2545F491


class Xorshift32:
    """detsim's generator (shifts 13, 17, 5 on a 32-bit state; seed 0 replaced as the models do)."""

    def __init__(self, seed: int) -> None:
        self.state = (seed & 0xFFFFFFFF) or ZERO_SEED_SUBSTITUTE

    def next_uint(self) -> int:
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x


def wrap(d: int, size: int) -> int:
    m = d % size
    return m - size if m > size // 2 else m


class TorusForage(gymnasium.Env):
    """forage-v1 for one agent: a W x H torus with `food` cells placed and respawned from the
    env's own Xorshift32; a step moves the agent one cell and eats food there (reward 1); the
    observation is (x, y, foodDx, foodDy, score) with the nearest food by torus Manhattan distance."""

    metadata = {'render_modes': []}

    def __init__(self, width: int, height: int, food: int) -> None:
        self.width, self.height, self.food_count = width, height, food
        big = max(width, height)
        self.observation_space = spaces.Box(-big, 1 << 30, shape=(5,), dtype=np.int64)
        self.action_space = spaces.Discrete(len(ACTIONS))
        self.rng = Xorshift32(0)
        self.x = self.y = self.score = 0
        self.has_food = bytearray(width * height)
        self.food: list[int] = []

    def _place(self, exclude: int) -> None:
        cells = self.width * self.height
        c = self.rng.next_uint() % cells
        while self.has_food[c] or c == exclude:
            c = (c + 1) % cells
        self.has_food[c] = 1
        bisect.insort(self.food, c)

    def _observe(self) -> np.ndarray:
        best, bdx, bdy = -1, 0, 0
        for c in self.food:
            dx = wrap(c % self.width - self.x, self.width)
            dy = wrap(c // self.width - self.y, self.height)
            dist = abs(dx) + abs(dy)
            if best < 0 or dist < best:
                best, bdx, bdy = dist, dx, dy
        return np.array((self.x, self.y, bdx, bdy, self.score), dtype=np.int64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.rng = Xorshift32(seed if seed is not None else 0)
        self.x = self.rng.next_uint() % self.width
        self.y = self.rng.next_uint() % self.height
        self.score = 0
        self.has_food = bytearray(self.width * self.height)
        self.food = []
        for _ in range(self.food_count):
            self._place(-1)
        return self._observe(), {}

    def step(self, action):
        move = ACTIONS[int(action)]
        self.x = (self.x + MOVE_DX[move] + self.width) % self.width
        self.y = (self.y + MOVE_DY[move] + self.height) % self.height
        c = self.y * self.width + self.x
        reward = 0.0
        if self.has_food[c]:
            self.has_food[c] = 0
            self.food.remove(c)
            self.score += 1
            reward = 1.0
            self._place(c)
        return self._observe(), reward, False, False, {}


class Walker:
    """walker-v1's policy, one RNG draw per step: head for the nearest food, explore 1 in 8."""

    def __init__(self, seed: int, explore: int = 8) -> None:
        self.rng, self.explore = Xorshift32(seed), explore

    def act(self, obs) -> int:
        r = self.rng.next_uint()
        dx, dy = int(obs[2]), int(obs[3])
        if r % self.explore == 0:
            move = DIRECTIONS[(r >> 3) % 4]
        elif dx == 0 and dy == 0:
            move = 'stay'
        elif abs(dx) >= abs(dy):
            move = 'east' if dx > 0 else 'west'
        else:
            move = 'south' if dy > 0 else 'north'
        return ACTIONS.index(move)


def make_env(width: int, height: int, food: int):
    return lambda: TorusForage(width, height, food)


VECTORS = {'async': AsyncVectorEnv, 'sync': SyncVectorEnv}


def measure(n: int, vector: str, args) -> dict:
    envs = VECTORS[vector]([make_env(args.width, args.height, args.food) for _ in range(n)])
    try:
        obs, _ = envs.reset(seed=[args.seed + i for i in range(n)])
        policies = [Walker(args.seed * 7919 + i + 1) for i in range(n)]

        def run(steps: int) -> float:
            nonlocal obs
            total = 0.0
            for _ in range(steps):
                actions = np.fromiter((p.act(o) for p, o in zip(policies, obs)), dtype=np.int64, count=n)
                obs, rewards, _, _, _ = envs.step(actions)
                total += float(rewards.sum())
            return total

        run(args.warmup)
        start = time.perf_counter()
        eaten = run(args.steps)
        seconds = time.perf_counter() - start
    finally:
        envs.close()
    return {
        'n': n,
        'vector': vector,
        'processes': n if vector == 'async' else 0,
        'steps': args.steps,
        'warmupSteps': args.warmup,
        'seconds': seconds,
        'envStepsPerSec': args.steps * n / seconds,
        'foodEaten': eaten,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--n', type=int, action='append', required=True, help='vector size; repeat')
    parser.add_argument('--vector', choices=sorted(VECTORS), action='append', help='async (default), sync; repeat')
    parser.add_argument('--steps', type=int, required=True)
    parser.add_argument('--warmup', type=int, required=True)
    parser.add_argument('--width', type=int, default=32)
    parser.add_argument('--height', type=int, default=32)
    parser.add_argument('--food', type=int, default=16)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()
    results = [measure(n, v, args) for n in args.n for v in (args.vector or ['async'])]
    print(
        json.dumps(
            {
                'peer': 'gymnasium.vector',
                'versions': {
                    'gymnasium': gymnasium.__version__,
                    'numpy': np.__version__,
                    'python': platform.python_version(),
                },
                'env': {'width': args.width, 'height': args.height, 'food': args.food, 'seed': args.seed},
                'results': results,
            }
        )
    )
    sys.stdout.flush()


if __name__ == '__main__':
    main()
