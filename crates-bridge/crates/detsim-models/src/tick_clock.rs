// The exact rational tick accumulator (docs/spec/lockstep.md), as workers/tick-clock.ts: per Prepare
// acc += stepDuration; ticks = floor(acc / tick); acc -= ticks * tick. Integers over a common
// denominator in u128; a common denominator beyond u128 is refused (TypeScript uses bigint).
use detsim_formats::{DetsimError, RationalNs, Reason};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickClock {
    den: u128,
    step_units: u128,
    tick_units: u128,
    rem_units: u128,
    /// Total ticks executed.
    pub brain_ticks: u64,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn overflow() -> DetsimError {
    DetsimError::new(
        Reason::StructRationalOverflow,
        "tick clock: the common denominator does not fit 128 bits",
    )
}

fn lcm(a: u128, b: u128) -> Result<u128, DetsimError> {
    (a / gcd(a, b)).checked_mul(b).ok_or_else(overflow)
}

impl TickClock {
    pub fn new(
        step: RationalNs,
        tick: RationalNs,
        remainder: RationalNs,
        brain_ticks: u64,
    ) -> Result<TickClock, DetsimError> {
        let (a, b, c) = (
            step.denominator() as u128,
            tick.denominator() as u128,
            remainder.denominator() as u128,
        );
        let den = lcm(lcm(a, b)?, c)?;
        let units = |num: u64, d: u128| (num as u128).checked_mul(den / d).ok_or_else(overflow);
        let clock = TickClock {
            den,
            step_units: units(step.numerator(), a)?,
            tick_units: units(tick.numerator(), b)?,
            rem_units: units(remainder.numerator(), c)?,
            brain_ticks,
        };
        if clock.tick_units == 0 {
            return Err(DetsimError::new(
                Reason::StructInvalidRational,
                "tick clock: the tick duration must be non-zero",
            ));
        }
        if clock.rem_units >= clock.tick_units {
            return Err(DetsimError::new(
                Reason::StructInvalidRational,
                format!("remainder {remainder} is not below the tick {tick}"),
            ));
        }
        Ok(clock)
    }

    /// Advance by one world step; returns the ticks to run now.
    pub fn advance(&mut self) -> Result<u64, DetsimError> {
        let acc = self.rem_units.checked_add(self.step_units).ok_or_else(overflow)?;
        let ticks = acc / self.tick_units;
        self.rem_units = acc - ticks * self.tick_units;
        let ticks = u64::try_from(ticks)
            .map_err(|_| DetsimError::new(Reason::StructRationalOverflow, "tick clock: ticks beyond U64"))?;
        self.brain_ticks = self
            .brain_ticks
            .checked_add(ticks)
            .ok_or_else(|| DetsimError::new(Reason::StructRationalOverflow, "tick clock: brainTicks beyond U64"))?;
        Ok(ticks)
    }

    pub fn remainder(&self) -> Result<RationalNs, DetsimError> {
        RationalNs::of(self.rem_units, self.den, "remainder")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixty_hertz_against_one_millisecond_gives_16_17_17() {
        let step = RationalNs::of(50_000_000, 3, "step").unwrap();
        let tick = RationalNs::of(1_000_000, 1, "tick").unwrap();
        let mut clock = TickClock::new(step, tick, RationalNs::ZERO, 0).unwrap();
        let ticks: Vec<u64> = (0..3).map(|_| clock.advance().unwrap()).collect();
        assert_eq!(ticks, [16, 17, 17]);
        assert_eq!(clock.brain_ticks, 50);
        assert!(clock.remainder().unwrap().is_zero());
        assert!(TickClock::new(step, tick, tick, 0).is_err());
    }
}
