// The exact rational tick accumulator of docs/spec/lockstep.md: per Prepare, acc += stepDuration;
// ticks = floor(acc / tick); acc -= ticks * tick. Held as integers over a common denominator so
// the hot path is bigint add/divide only. Not the model: it only says how many ticks to run.
import { RationalNs } from '../core/formats/scalars.js';

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

  /** Advance by one world step; returns the ticks to run now. */
  advance(): bigint {
    const acc = this.remUnits + this.stepUnits;
    const ticks = acc / this.tickUnits;
    this.remUnits = acc - ticks * this.tickUnits;
    this.brainTicks += ticks;
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
