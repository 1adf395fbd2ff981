# check_model finds the two defects a researcher's numpy model hits (issue #27): a capture that drops
# the Generator's has_uint32/uinteger (wrong only after an odd number of uint32 draws), and a capture
# that turns PCG64's 128-bit integers into floats. Each is named by its path; the same model written
# with the SDK's rng_state/restore_rng passes; and a control shows the old three-boundary schedule
# misses the late defect. Also: seeds (seed_u32, numpy_rng) and restore_rng's refusals.
import numpy as np
import pytest
from detsim_worker.sdk import AgentInitContext, AgentModel, restore_rng, rng_state
from detsim_worker.testing import ModelCheckError, check_model, restore_boundaries


class Drawer(AgentModel):
    """Draws one uint32 per step in steps 60-99 (elsewhere float draws only): has_uint32 is 1 only at the odd
    boundaries between 61 and 99, so a restore anywhere else cannot see a dropped half word."""

    model_version = 'drawer-v1'

    def initialize(self, ctx):
        return {'rng': ctx.numpy_rng(), 'total': 0}

    def prepare(self, state, ctx):
        rng = state['rng']
        x = int(rng.integers(0, 2**32, dtype=np.uint32)) if 60 <= ctx.step < 100 else int(rng.random() * 1000)
        state['total'] += x % 7
        return {'move': ['north', 'south', 'east', 'west'][x % 4]}

    def commit(self, state, ctx):
        pass

    def capture(self, state):
        return {'rng': rng_state(state['rng']), 'total': state['total']}

    def restore(self, data, ctx):
        return {'rng': restore_rng(data['rng']), 'total': data['total']}


class DropsHalfWord(Drawer):
    def capture(self, state):
        s = rng_state(state['rng'])
        return {'rng': {'bit_generator': s['bit_generator'], 'state': s['state']}, 'total': state['total']}

    def restore(self, data, ctx):
        return {'rng': restore_rng({**data['rng'], 'has_uint32': 0, 'uinteger': 0}), 'total': data['total']}


class FloatState(Drawer):
    def capture(self, state):
        s = rng_state(state['rng'])
        return {'rng': {**s, 'state': {k: float(v) for k, v in s['state'].items()}}, 'total': state['total']}

    def restore(self, data, ctx):
        s = data['rng']
        return {'rng': restore_rng({**s, 'state': {k: int(v) for k, v in s['state'].items()}}), 'total': data['total']}


def test_the_model_written_with_rng_state_passes():
    check_model(Drawer, steps=120)


def test_a_capture_that_drops_has_uint32_is_named_by_path():
    with pytest.raises(
        ModelCheckError, match=r'state\.rng\.bit_generator\.state\.has_uint32 differs right after a restore'
    ):
        check_model(DropsHalfWord, steps=120)


def test_a_capture_that_floats_the_128_bit_state_is_named_by_path():
    with pytest.raises(ModelCheckError, match=r'boundary 1: state\.rng\.bit_generator\.state\.state\.inc differs'):
        check_model(FloatState, steps=120)


def test_control_three_boundaries_miss_the_late_half_word_defect():
    # The old schedule (1, steps//2, steps-1): at 1, 60 and 119 has_uint32 is 0, so nothing differs.
    check_model(DropsHalfWord, steps=120, boundaries=[1, 60, 119])
    assert [b for b in restore_boundaries(120, 12345) if 61 <= b < 100 and b % 2 == 1]
    assert len(restore_boundaries(120, 12345)) == 19 + 10
    assert restore_boundaries(120, 12345) == restore_boundaries(120, 12345)


def test_seeds_fit_numpy():
    ctx = AgentInitContext('a', -5, {}, {})
    assert ctx.seed == -5 and ctx.seed_u32 == 2**32 - 5
    assert ctx.numpy_rng().random() == np.random.Generator(np.random.PCG64(2**32 - 5)).random()
    with pytest.raises(ValueError):
        np.random.default_rng(ctx.seed)  # what a researcher hit: numpy wants a non-negative seed


def test_restore_rng_refuses_a_state_that_does_not_fit():
    state = rng_state(np.random.default_rng(3))
    with pytest.raises(
        ValueError, match=r'rng\.state\.state: .* is a float where the bit generator state holds an integer'
    ):
        restore_rng({**state, 'state': {**state['state'], 'state': 1.5}})
    with pytest.raises(ValueError, match=r"rng\.bit_generator: 'Nope' is not a numpy bit generator"):
        restore_rng({**state, 'bit_generator': 'Nope'})
