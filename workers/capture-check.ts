// The exactness check of a user model's capture (docs/spec/state-codec.md), as the Python worker's
// capture_check.py: the captured state is encoded, decoded and handed to the model's own restore as a
// scratch copy; the copy must equal the live state as data (objects and class instances by their own
// fields, typed arrays by bytes, numbers with -0 told apart), and capturing it again must give the same
// bytes. Else the capture is refused naming the participant and the first differing path (a capture
// that drops a field restore needs, a restore that rebuilds a value differently). Every capture of a
// user model in strict mode (opt-in: the live comparison looks into any object the state holds);
// built-in models skip it.
// NOT the codec (state-codec.ts) and NOT the Capture reply (the hosts build it).
import { ProtocolRefusal } from '../core/protocol/envelope.js';
import { callModel } from './model-call.js';
import { decodeState, encodeState } from './state-codec.js';

/** What the check needs of a hosted model: its restore (with the participant's context) and capture. */
export interface ExactCheckTarget {
  restore(data: unknown): unknown;
  capture(state: unknown): unknown;
}

/** The path of the first place two decoded states differ (keys in sorted order), or null. */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | null {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);
  if (isObject(a) && isObject(b)) {
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      if (!(key in a) || !(key in b)) return `${path}.${key}`;
      const found = firstDifference(a[key], b[key], `${path}.${key}`);
      if (found !== null) return found;
    }
    return null;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    for (let i = 0; i < a.length; i++) {
      const found = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  return encodeState(a).equals(encodeState(b)) ? null : path;
}

type Found = readonly [path: string, live: unknown, restored: unknown] | null;

/** The first place two live model states differ as data, or null (functions are not compared). */
export function liveDifference(a: unknown, b: unknown, path = '$', depth = 0): Found {
  if (depth > 64 || typeof a === 'function') return null;
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null)
    return Object.is(a, b) ? null : [path, a, b];
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return [path, a.constructor?.name, b.constructor?.name];
  if (ArrayBuffer.isView(a)) {
    const bytes = (v: ArrayBufferView) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    return bytes(a).equals(bytes(b as ArrayBufferView)) ? null : [path, a, b];
  }
  if (a instanceof Map)
    return liveDifference(Object.fromEntries(a), Object.fromEntries(b as Map<unknown, unknown>), path, depth);
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  for (const key of [...new Set([...Object.keys(left), ...Object.keys(right)])].sort()) {
    const at = Array.isArray(a) ? `${path}[${key}]` : `${path}.${key}`;
    if (!(key in left) || !(key in right)) return [at, left[key], right[key]];
    const found = liveDifference(left[key], right[key], at, depth + 1);
    if (found !== null) return found;
  }
  return null;
}

const shown = (v: unknown): string => {
  const text = typeof v === 'bigint' ? `${v}n` : Object.is(v, -0) ? '-0' : String(v);
  return text.length <= 80 ? text : `${text.slice(0, 77)}...`;
};

/**
 * Refuse (BACKEND_FAILURE naming `who`) a capture whose state does not survive the model's restore:
 * the restored copy differs from `live` as data, or captures again differently.
 */
export function exactCapture(
  target: ExactCheckTarget,
  state: unknown,
  strict: boolean,
  who: string,
  live?: unknown,
): void {
  let data: Buffer;
  try {
    data = encodeState(state);
  } catch (e) {
    throw new ProtocolRefusal(
      'BACKEND_FAILURE',
      `${who}: capture state cannot be encoded: ${(e as Error).message}`,
      'none',
    );
  }
  const restored = callModel(strict, who, 'restore (capture check)', 'none', () => target.restore(decodeState(data)));
  const found = live === undefined ? null : liveDifference(live, restored);
  if (found !== null)
    throw new ProtocolRefusal(
      'BACKEND_FAILURE',
      `${who}: capture is not exact: state ${found[0]} differs after a restore: ${shown(found[1])} live, ${shown(found[2])} restored (capture must return everything restore needs, exactly)`,
      'none',
    );
  const again = callModel(strict, who, 'capture (capture check)', 'none', () => target.capture(restored));
  let second: Buffer;
  try {
    second = encodeState(again);
  } catch (e) {
    throw new ProtocolRefusal('BACKEND_FAILURE', `${who}: capture is not exact: ${(e as Error).message}`, 'none');
  }
  if (second.equals(data)) return;
  const where = firstDifference(decodeState(data), decodeState(second)) ?? '$';
  throw new ProtocolRefusal(
    'BACKEND_FAILURE',
    `${who}: capture is not exact: state ${where} does not survive restore (capture must return everything restore needs, exactly)`,
    'none',
  );
}
