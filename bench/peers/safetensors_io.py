# safetensors peer of detsim's durable checkpoint commit and restore: save_file of one float64
# array of the given size + fsync of the file, then load_file + SHA-256 over the loaded bytes
# checked against the digest taken before saving; prints one JSON line. Not a detsim measurement.
import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import safetensors
from safetensors.numpy import load_file, save_file


def state_of(size_bytes: int, seed: int) -> np.ndarray:
    # Seeded random doubles: incompressible, like a real model state, and the same every run.
    return np.random.default_rng(seed).random(size_bytes // 8, dtype=np.float64)


def save_once(state: np.ndarray, path: str) -> float:
    start = time.perf_counter()
    save_file({'state': state}, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def load_once(path: str, expected: str) -> float:
    start = time.perf_counter()
    loaded = load_file(path)['state']
    digest = hashlib.sha256(np.ascontiguousarray(loaded).data).hexdigest()
    seconds = time.perf_counter() - start
    if digest != expected:
        raise SystemExit(f'safetensors peer: loaded state digest {digest} != saved {expected}')
    return seconds


def summary(samples: list[float], size_bytes: int) -> dict:
    median = statistics.median(samples)
    return {'samples': samples, 'medianSeconds': median, 'mbPerSec': size_bytes / 1e6 / median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--bytes', type=int, required=True, help='state size (multiple of 8)')
    parser.add_argument('--dir', required=True, help='directory for the file (removed after)')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()
    if args.bytes <= 0 or args.bytes % 8:
        raise SystemExit('safetensors peer: --bytes must be a positive multiple of 8')
    state = state_of(args.bytes, args.seed)
    expected = hashlib.sha256(state.data).hexdigest()
    path = os.path.join(args.dir, 'peer-state.safetensors')
    saves, loads = [], []
    try:
        for _ in range(args.repeats):
            saves.append(save_once(state, path))
            loads.append(load_once(path, expected))
        file_bytes = os.path.getsize(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    print(
        json.dumps(
            {
                'peer': 'safetensors.numpy',
                'versions': {
                    'safetensors': safetensors.__version__,
                    'numpy': np.__version__,
                    'python': platform.python_version(),
                },
                'stateBytes': args.bytes,
                'fileBytes': file_bytes,
                'stateSha256': expected,
                'save': summary(saves, args.bytes),
                'loadVerify': summary(loads, args.bytes),
            }
        )
    )
    sys.stdout.flush()


if __name__ == '__main__':
    main()
