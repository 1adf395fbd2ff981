// Strict mode for model callbacks: while a callback runs, Math.random, Date.now, new Date() (no
// arguments), performance.now, crypto.getRandomValues and crypto.randomUUID throw an error naming
// the agent and the call. Not a sandbox: it catches the common sources of hidden nondeterminism
// (not node:crypto imported by a model, nor process.hrtime), nothing more.

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
 * The clock and the randomness on global objects that live on their prototypes. Swapping them per
 * call (define, then delete) cost ~1 µs a model call — 30 µs of a 16-agent step on its agent thread
 * — so each gets, at the first guarded call, an own stand-in that refuses while a guarded callback
 * runs and otherwise calls the prototype's function: outside a callback they behave as before.
 */
const OWN_TRAPS: { target: object; key: string; callName: string }[] = [
  { target: globalThis.performance, key: 'now', callName: 'performance.now()' },
  { target: globalThis.crypto, key: 'getRandomValues', callName: 'crypto.getRandomValues()' },
  { target: globalThis.crypto, key: 'randomUUID', callName: 'crypto.randomUUID()' },
];

let ownTrapsInstalled = false;

function installOwnTraps(): void {
  if (ownTrapsInstalled) return;
  ownTrapsInstalled = true;
  for (const t of OWN_TRAPS) {
    const real = (t.target as Record<string, unknown>)[t.key];
    if (typeof real !== 'function') continue;
    const callName = t.callName;
    const guarded = function (this: unknown, ...args: unknown[]): unknown {
      if (current) violation(callName);
      return Reflect.apply(real as (...a: unknown[]) => unknown, this, args);
    };
    Object.defineProperty(t.target, t.key, { value: guarded, writable: true, configurable: true });
  }
}

/**
 * Run `fn` with the clock and randomness refused when `strict`; the globals are restored
 * afterwards whatever happens. `participant` is e.g. `agent walker-3`.
 */
export function runGuarded<T>(strict: boolean, participant: string, callback: string, fn: () => T): T {
  if (!strict) return fn();
  const outer = current;
  current = { participant, callback };
  const g = globalThis as { Date: DateConstructor };
  if (!outer) {
    Math.random = strictRandom;
    g.Date = StrictDate;
    installOwnTraps();
  }
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
