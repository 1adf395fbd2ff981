# Deliberately bad agent models for test_strict.py (loaded as python:strict_models:<Class>), and a user's
# Python environment model for strict capture (PyForage). Not tests.
import random
import time

from detsim_worker.models.forage import Forage
from detsim_worker.sdk import AgentModel


class _Base(AgentModel):
    model_version = 'bad-v1'

    def initialize(self, ctx):
        return {}

    def commit(self, state, ctx):
        pass

    def capture(self, state):
        return {}

    def restore(self, data, ctx):
        return {}


class Dice(_Base):
    def prepare(self, state, ctx):
        return {'move': 'east' if random.random() < 0.5 else 'west'}


class Clock(_Base):
    def prepare(self, state, ctx):
        return {'t': time.time()}


class PerfClock(_Base):
    def prepare(self, state, ctx):
        return {'t': time.perf_counter()}


class UnseededRandom(_Base):
    def prepare(self, state, ctx):
        return {'move': 'east' if random.Random().random() < 0.5 else 'west'}


class SeededRandom(_Base):
    def prepare(self, state, ctx):
        return {'move': 'east' if random.Random(7).random() < 0.5 else 'west'}


class Raises(_Base):
    def prepare(self, state, ctx):
        raise ValueError('the model broke')


class NotJson(_Base):
    def prepare(self, state, ctx):
        return {'x': float('nan')}


class NotJsonSet(_Base):
    def prepare(self, state, ctx):
        return {'x': {1, 2}}


class HugeInt(_Base):
    def prepare(self, state, ctx):
        return {'move': 'east', 'scores': [1, 10**400]}


class BeyondInt64(_Base):
    def prepare(self, state, ctx):
        return {'move': 'east', 'id': 2**63 + 1}


class NotAnObject(_Base):
    def prepare(self, state, ctx):
        return 'east'


class Shared(_Base):
    """Every agent gets the one class-level state (params shared: false: its own), and each prepare moves it."""

    counter = {'n': 0}
    accepted_params = ('shared',)

    def initialize(self, ctx):
        return self.counter if ctx.params.get('shared', True) else {'n': 0}

    def prepare(self, state, ctx):
        state['n'] += 1
        return {'move': ('north', 'east', 'south', 'west')[state['n'] % 4]}

    def capture(self, state):
        return {'n': state['n']}

    def restore(self, data, ctx):
        return {'n': data['n']}


class Slow(_Base):
    """An initialize that takes 1.5 s (waiting on the monotonic clock, which strict mode allows)."""

    def initialize(self, ctx):
        import threading

        threading.Event().wait(1.5)
        return {}

    def prepare(self, state, ctx):
        return {'move': 'stay'}


class BreaksTheServer(_Base):
    """A (non-strict) initialize that breaks time.time for the whole process, as strict mode once did:
    gRPC's serving loop calls it every second on its own thread, raises, and that thread ends."""

    def initialize(self, ctx):
        import time

        def broken():
            raise RuntimeError('time.time is broken by this model')

        time.time = broken
        return {}

    def prepare(self, state, ctx):
        return {'move': 'stay'}


class PyForage(Forage):
    """The built-in forage, loaded as a user's Python environment model (python:strict_models:PyForage)."""

    model_version = 'py-forage-test-v1'


class Int32Digest(Forage):
    """A user's environment whose digest holds a numpy int32 (not JSON): the refusal names digest."""

    def digest(self, state):
        import numpy as np

        return {**super().digest(state), 'n': np.int32(1)}


class MissingKey(_Base):
    def prepare(self, state, ctx):
        return {'move': state['missing']}
