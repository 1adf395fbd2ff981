// The exact rational tick accumulator of docs/spec/lockstep.md: per Prepare, acc += stepDuration;
// ticks = floor(acc / tick); acc -= ticks * tick. Held as integers over a common denominator so
// the hot path is bigint add/divide only. Not the model: it only says how many ticks to run.
import { DetsimError } from '../core/formats/errors.js';
import { RationalNs, U64_MAX } from '../core/formats/scalars.js';

export class TickClock {
  private readonly den: bigint;
  private readonly stepUnits: bigint;
  private readonly tickUnits: bigint;
  /** Remainder in units of 1/den ns, always in [0, tick). */
  private remUnits: bigint;
  /** Total ticks executed (brainTicks). */
  brainTicks: bigint;

  constructor(
    readonly stepDuration: RationalNs,
    readonly tickDuration: RationalNs,
    remainder: RationalNs = RationalNs.ZERO,
    brainTicks = 0n,
  ) {
    const a = stepDuration.den;
    const b = tickDuration.den;
    const c = remainder.den;
    this.den = lcm(lcm(a, b), c);
    this.stepUnits = stepDuration.num * (this.den / a);
    this.tickUnits = tickDuration.num * (this.den / b);
    this.remUnits = remainder.num * (this.den / c);
    if (this.remUnits >= this.tickUnits)
      throw new Error(`remainder ${remainder} is not below the tick ${tickDuration}`);
    this.brainTicks = brainTicks;
  }

  /**
   * Advance by one world step; returns the ticks to run now. Ticks or a total beyond U64 are an
   * error (struct_rational_overflow, as the Rust port says it) and leave the clock unchanged.
   */
  advance(): bigint {
    const acc = this.remUnits + this.stepUnits;
    const ticks = acc / this.tickUnits;
    if (ticks > U64_MAX) throw new DetsimError('struct_rational_overflow', 'tick clock: ticks beyond U64');
    const total = this.brainTicks + ticks;
    if (total > U64_MAX) throw new DetsimError('struct_rational_overflow', 'tick clock: brainTicks beyond U64');
    this.remUnits = acc - ticks * this.tickUnits;
    this.brainTicks = total;
    return ticks;
  }

  get remainder(): RationalNs {
    return RationalNs.of(this.remUnits, this.den);
  }
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

function lcm(a: bigint, b: bigint): bigint {
  return (a / gcd(a, b)) * b;
}
