# detsim_worker.testing.check_model: passes the built-ins and the example model; fails a model that
# is nondeterministic from the start, one that diverges only at a later step (the check compares
# every step), one whose restore loses state, and one whose agents share one state (a prepare moves
# another agent's), naming the step and the field.
import random

import pytest
from detsim_worker.examples import Coin
from detsim_worker.models.forage import Forage
from detsim_worker.models.lif import Lif
from detsim_worker.models.walker import Walker
from detsim_worker.sdk import AgentModel
from detsim_worker.testing import ModelCheckError, check_model


def test_the_built_ins_and_the_example_pass():
    check_model(Walker, {'explore': 3}, steps=40)
    check_model(Lif, {'neurons': 32}, steps=12)
    check_model(Coin, steps=20)
    check_model(
        Forage,
        {'width': 6, 'height': 5, 'food': 4},
        steps=30,
        actions=lambda k, p: {'move': ['north', 'east', 'south', 'west', 'stay'][k % 5]},
    )


class Unseeded(AgentModel):
    model_version = 'unseeded-v1'

    def initialize(self, ctx):
        return {'n': 0}

    def prepare(self, state, ctx):
        return {'move': random.choice(['east', 'west', 'north', 'south'] * 4 + ['stay']), 'k': ctx.step}

    def commit(self, state, ctx):
        state['n'] += 1

    def capture(self, state):
        return dict(state)

    def restore(self, data, ctx):
        return dict(data)


class LateDrift(Unseeded):
    """Deterministic until step 7, where a counter shared by every instance leaks into the decision."""

    calls = 0

    def prepare(self, state, ctx):
        LateDrift.calls += 1
        return {'move': 'east', 'late': LateDrift.calls if ctx.step >= 7 else 0}


class ForgetfulRestore(Unseeded):
    def prepare(self, state, ctx):
        return {'n': state['n']}

    def restore(self, data, ctx):
        return {'n': 0}


def test_an_unseeded_model_fails_naming_the_step_and_field():
    random.seed(1)
    with pytest.raises(ModelCheckError) as e:
        check_model(Unseeded, steps=30)
    assert e.value.field == 'decision.move'


def test_a_model_that_diverges_late_fails_at_that_step():
    with pytest.raises(ModelCheckError) as e:
        check_model(LateDrift, steps=20)
    assert (e.value.step, e.value.field) == (7, 'decision.late')
    assert str(e.value).startswith('step 7: decision.late differs: ')


def test_a_restore_that_loses_state_fails_naming_the_boundary():
    with pytest.raises(ModelCheckError) as e:
        check_model(ForgetfulRestore, steps=10, boundaries=[4])
    assert (e.value.step, e.value.field) == (4, 'state.n')
    assert 'differs right after a restore' in str(e.value)


class SharedCounter(Unseeded):
    """Deterministic alone, but every instance's state is one class-level dict that each prepare moves."""

    counter = {'n': 0}

    def initialize(self, ctx):
        return SharedCounter.counter

    def prepare(self, state, ctx):
        state['n'] += 1
        return {'move': 'east'}


def test_a_model_whose_agents_share_state_fails_naming_the_step_and_prepare():
    with pytest.raises(ModelCheckError) as e:
        check_model(SharedCounter, steps=10)
    assert (e.value.step, e.value.field) == (0, 'state')
    assert str(e.value) == (
        "step 0: prepare changed another agent's state: the second copy's prepare changed the first copy's captured "
        'state (agents must not share mutable state: give each agent its own in initialize and restore)'
    )


class NumpyObservationForage(Forage):
    """Forage whose observations carry a numpy int64 (a run refuses it at Environment.Initialize)."""

    def observe(self, state):
        import numpy as np

        return {a: {**o, 'food': np.int64(1)} for a, o in super().observe(state).items()}


class NumpyRewardForage(Forage):
    """Forage whose rewards carry numpy float32 values (a run refuses them at the first Advance)."""

    def advance(self, state, ctx):
        import numpy as np

        out = super().advance(state, ctx)
        return {**out, 'rewards': [{**r, 'value': np.float32(r['value'])} for r in out['rewards']]}


class NumpyDecision(Unseeded):
    def prepare(self, state, ctx):
        import numpy as np

        return {'move': 'east', 'k': np.int64(ctx.step)}


def test_what_a_run_would_refuse_as_not_json_fails_the_check_naming_the_step():
    pytest.importorskip('numpy')
    forage = {'width': 6, 'height': 5, 'food': 4}
    act = {'actions': lambda k, p: {'move': 'east'}}
    with pytest.raises(ModelCheckError, match=r'^step 0: what observe returned is not JSON: int64 at \$\.'):
        check_model(NumpyObservationForage, forage, steps=5, **act)
    with pytest.raises(
        ModelCheckError, match=r'^step [0-9]+: what advance returned is not JSON: float32 at \$\.rewards\[0\]\.value'
    ):
        check_model(NumpyRewardForage, {**forage, 'food': 12}, steps=30, **act)
    with pytest.raises(ModelCheckError, match=r'^step 0: the decision prepare returned is not JSON: int64 at \$\.k'):
        check_model(NumpyDecision, steps=5)


class HalvesAFloat(Unseeded):
    """State f = 3.0; its decision depends on f being a float: 3.0 / 2 and 3 // 2 differ."""

    def initialize(self, ctx):
        return {'f': 3.0}

    def prepare(self, state, ctx):
        f = state['f']
        return {'half': repr(f / 2 if isinstance(f, float) else f // 2)}

    def commit(self, state, ctx):
        pass


class HalvesAFloatRestored(HalvesAFloat):
    def restore(self, data, ctx):
        return {'f': float(data['f'])}


def test_a_float_that_comes_back_as_an_int_is_named_at_the_first_boundary_with_the_fix():
    # The codec gives a float with an integral value back as an int (as JavaScript holds it); a
    # restore that keeps the int is a different state, and strict mode's capture check says so too.
    from detsim_worker.capture_check import CaptureNotExact, check_exact

    with pytest.raises(ModelCheckError) as e:
        check_model(HalvesAFloat, steps=5)
    assert str(e.value) == (
        'boundary 1: state.f differs right after a restore: 3.0 live, 3 restored '
        '(a float with an integral value comes back as an int: rebuild it with float() in restore)'
    )
    with pytest.raises(CaptureNotExact, match=r'state \$\.f differs after a restore: 3\.0 live, 3 restored \(a float'):
        check_exact({'f': 3.0}, lambda d: dict(d), lambda s: dict(s), live={'f': 3.0})
    check_model(HalvesAFloatRestored, steps=5)  # control: float() in restore passes
    check_exact({'f': 3.0}, lambda d: {'f': float(d['f'])}, lambda s: dict(s), live={'f': 3.0})
