// parseExpectedCanonical (the trace reader's parser): JSON.parse plus a canonical round trip must
// give exactly what the strict parser gives — the same value, or the same refusal — for canonical
// text, for near-canonical text, and for the inputs the strict parser exists to refuse.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalize,
  parseExpectedCanonical,
  parseStrict,
  type JsonValue,
} from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { jsonValue } from './json-arbitrary.js';

type Outcome = { value: string } | { refused: string };

function outcome(parse: (t: string) => JsonValue, text: string): Outcome {
  try {
    return { value: canonicalize(parse(text)) };
  } catch (e) {
    if (e instanceof DetsimError) return { refused: `${e.reason}: ${e.message}` };
    throw e;
  }
}

const agrees = (text: string) => expect(outcome(parseExpectedCanonical, text)).toEqual(outcome(parseStrict, text));

describe('parseExpectedCanonical', () => {
  it('gives the strict parse of canonical text (property)', () => {
    fc.assert(
      // The arbitrary also makes integers beyond ±(2^53−1) (e.g. -2^53), whose canonical text both
      // parsers must refuse alike: compare outcomes (value or refusal), never assume a value.
      fc.property(jsonValue, (v) => {
        agrees(canonicalize(v as JsonValue));
      }),
    );
  });

  it('refuses exactly what the strict parser refuses, with its reason', () => {
    for (const text of [
      '{"a":1,"a":1}', // duplicate key: JSON.parse keeps the last silently
      '"\\ud800"', // lone surrogate
      '9007199254740992', // 2^53 in plain digits: canonical text, but beyond the safe range
      '-9007199254740992',
      '[1,12345678901234567890]',
      '[1e400]',
      '{"a":',
      '',
    ])
      agrees(text);
    expect(outcome(parseExpectedCanonical, '9007199254740992')).toHaveProperty('refused');
  });

  it('accepts non-canonical but valid JSON as the strict parser does', () => {
    for (const text of ['1.0', '{"b":1,"a":2}', '-0', '1e21', '{"__proto__":{"a":1}}', ' [ 1 , 2 ] ']) agrees(text);
  });
});
