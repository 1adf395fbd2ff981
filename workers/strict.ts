// Strict mode for model callbacks: while a callback runs, Math.random, Date.now and new Date()
// (no arguments) throw an error naming the agent and the call. Not a sandbox: it catches the
// common sources of hidden nondeterminism, nothing more.

const RealDate = Date;
const realRandom = Math.random;

/** Thrown inside a model callback under strict mode when it calls Math.random, Date.now or new Date(). */
export class StrictModeViolation extends Error {
  constructor(
    readonly participant: string,
    readonly callName: string,
    readonly callback: string,
  ) {
    super(
      `strict mode: ${participant} called ${callName} inside ${callback} (nondeterministic; derive randomness from the seed and time from the step)`,
    );
    this.name = 'StrictModeViolation';
  }
}

let current: { participant: string; callback: string } | undefined;

function violation(callName: string): never {
  const c = current!;
  throw new StrictModeViolation(c.participant, callName, c.callback);
}

function strictRandom(): number {
  return violation('Math.random()');
}
function strictNow(): number {
  return violation('Date.now()');
}

// A Date stand-in that refuses the clock but still builds dates from explicit values.
const StrictDate = function (this: unknown, ...args: unknown[]): unknown {
  if (!new.target) return violation('Date()');
  if (args.length === 0) return violation('new Date()');
  return Reflect.construct(RealDate, args, new.target === StrictDate ? RealDate : new.target);
} as unknown as DateConstructor;
Object.setPrototypeOf(StrictDate, RealDate);
(StrictDate as unknown as { prototype: Date }).prototype = RealDate.prototype;
Object.defineProperty(StrictDate, 'now', { value: strictNow, writable: true, configurable: true });

/**
 * Run `fn` with the clock and Math.random refused when `strict`; the globals are restored
 * afterwards whatever happens. `participant` is e.g. `agent walker-3`.
 */
export function runGuarded<T>(strict: boolean, participant: string, callback: string, fn: () => T): T {
  if (!strict) return fn();
  const outer = current;
  current = { participant, callback };
  const g = globalThis as { Date: DateConstructor };
  Math.random = strictRandom;
  g.Date = StrictDate;
  try {
    return fn();
  } finally {
    current = outer;
    if (!outer) {
      Math.random = realRandom;
      g.Date = RealDate;
    }
  }
}
