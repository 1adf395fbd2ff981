# Strict mode for model callbacks (workers/strict.ts in Python): while a callback runs, the global
# `random` functions and an unseeded random.Random(), time.time/time_ns/perf_counter/monotonic, os.urandom
# and numpy.random's global-state functions raise
# StrictModeViolation naming the participant and the call, on the thread that runs the callback
# only: every other thread of the process (gRPC's server loop calls time.time() every second) gets
# the real functions. Not a sandbox: it catches the common sources of hidden nondeterminism,
# nothing more (a seeded numpy Generator stays allowed; a thread the model starts is not guarded).
from __future__ import annotations

import os
import random
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_RANDOM_FUNCS = (
    'random',
    'randint',
    'randrange',
    'choice',
    'choices',
    'shuffle',
    'sample',
    'uniform',
    'gauss',
    'normalvariate',
    'getrandbits',
    'randbytes',
    'seed',
)
_NUMPY_FUNCS = (
    'rand',
    'randn',
    'random',
    'random_sample',
    'randint',
    'choice',
    'shuffle',
    'permutation',
    'normal',
    'uniform',
    'seed',
    'integers',
    'bytes',
    'standard_normal',
    'default_rng',
)


class StrictModeViolation(RuntimeError):
    def __init__(self, participant: str, call_name: str, callback: str) -> None:
        super().__init__(
            f'strict mode: {participant} called {call_name} inside {callback} '
            '(nondeterministic; derive randomness from the seed and time from the step)'
        )
        self.participant = participant
        self.call_name = call_name
        self.callback = callback


_current: list[tuple[str, str]] = []
# The thread whose callback is guarded (the functions are module attributes, shared by all threads).
_guarded_thread: list[int] = []


def _trap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        if not _current or threading.get_ident() != _guarded_thread[-1]:
            return real(*args, **kwargs)
        participant, callback = _current[-1]
        raise StrictModeViolation(participant, name, callback)

    return refuse


# The clocks a callback might read (perf_counter and monotonic as much as the wall clock).
_TIME_FUNCS = ('time', 'time_ns', 'perf_counter', 'perf_counter_ns', 'monotonic', 'monotonic_ns')


def _unseeded_refused(real: type) -> type:
    """random.Random as it is, except that one made without a seed (OS entropy) is refused."""
    refuse = _trap('random.Random() without a seed', lambda: None)

    class Random(real):  # type: ignore[misc, valid-type]
        def __init__(self, x: Any = None) -> None:
            if x is None:
                refuse()
            super().__init__(x)

    Random.__name__ = Random.__qualname__ = 'Random'
    return Random


def _targets() -> list[tuple[Any, str, str]]:
    targets = [(random, f, f'random.{f}()') for f in _RANDOM_FUNCS if hasattr(random, f)]
    targets += [(time, f, f'time.{f}()') for f in _TIME_FUNCS]
    targets += [(os, 'urandom', 'os.urandom()')]
    try:
        import numpy.random as npr
    except ImportError:  # pragma: no cover - numpy is a dependency
        return targets
    # default_rng() without a seed draws OS entropy; a seeded one is fine, but telling them apart
    # needs the arguments, so only the unseeded call is trapped (below).
    targets += [(npr, f, f'numpy.random.{f}()') for f in _NUMPY_FUNCS if hasattr(npr, f) and f != 'default_rng']
    return targets


@contextmanager
def guarded(strict: bool, participant: str, callback: str) -> Iterator[None]:
    if not strict:
        yield
        return
    outer = bool(_current)
    _current.append((participant, callback))
    _guarded_thread.append(threading.get_ident())
    saved: list[tuple[Any, str, Any]] = []
    if not outer:
        for module, name, shown in _targets():
            real = getattr(module, name)
            saved.append((module, name, real))
            setattr(module, name, _trap(shown, real))
        try:
            import numpy.random as npr

            real_default_rng = npr.default_rng
            saved.append((npr, 'default_rng', real_default_rng))
            unseeded = _trap('numpy.random.default_rng() without a seed', real_default_rng)

            def default_rng(seed: Any = None, *args: Any, **kwargs: Any) -> Any:
                if seed is None:
                    return unseeded(seed, *args, **kwargs)
                return real_default_rng(seed, *args, **kwargs)

            npr.default_rng = default_rng
        except ImportError:  # pragma: no cover
            pass
        saved.append((random, 'Random', random.Random))
        random.Random = _unseeded_refused(random.Random)
    try:
        yield
    finally:
        _current.pop()
        _guarded_thread.pop()
        for module, name, real in saved:
            setattr(module, name, real)
