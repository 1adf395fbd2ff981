# The exact rational tick accumulator (workers/tick-clock.ts): per Prepare acc += stepDuration;
# ticks = floor(acc / tick); acc -= ticks * tick; integers over a common denominator.
from __future__ import annotations

import math

from .scalars import U64_MAX, RationalNs


def _lcm(a: int, b: int) -> int:
    return a // math.gcd(a, b) * b


class TickClock:
    def __init__(
        self, step: RationalNs, tick: RationalNs, remainder: RationalNs = RationalNs(0, 1), brain_ticks: int = 0
    ) -> None:
        self.step_duration = step
        self.tick_duration = tick
        self.den = _lcm(_lcm(step.den, tick.den), remainder.den)
        self.step_units = step.num * (self.den // step.den)
        self.tick_units = tick.num * (self.den // tick.den)
        self.rem_units = remainder.num * (self.den // remainder.den)
        if self.rem_units >= self.tick_units:
            raise ValueError(f'remainder {remainder} is not below the tick {tick}')
        self.brain_ticks = brain_ticks

    def advance(self) -> int:
        """Ticks to run this step; ticks or a total beyond U64 raise and leave the clock unchanged."""
        acc = self.rem_units + self.step_units
        ticks = acc // self.tick_units
        if ticks > U64_MAX:
            raise OverflowError('tick clock: ticks beyond U64')
        if self.brain_ticks + ticks > U64_MAX:
            raise OverflowError('tick clock: brainTicks beyond U64')
        self.rem_units = acc - ticks * self.tick_units
        self.brain_ticks += ticks
        return ticks

    @property
    def remainder(self) -> RationalNs:
        return RationalNs.of(self.rem_units, self.den)
