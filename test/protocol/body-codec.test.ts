// The hot-path body reader must be exactly as strict as canonical JSON: anything that is not
// byte-for-byte RFC 8785 canonical is refused with a reason; canonical bodies round-trip.
import { describe, expect, it } from 'vitest';
import { decodeBody, encodeBody } from '../../core/protocol/index.js';

/** The reason decodeBody gives, or 'accepted'; `as` 'bytes' (a gRPC body) or 'text' (a thread port's). */
const refuse = (text: string | Buffer, as: 'bytes' | 'text' = 'bytes') => {
  try {
    if (as === 'text') decodeBody(Buffer.isBuffer(text) ? text.toString('utf8') : text);
    else decodeBody(Buffer.isBuffer(text) ? text : Buffer.from(text, 'utf8'));
  } catch (e) {
    return (e as { reason?: string }).reason;
  }
  return 'accepted';
};

describe('decodeBody', () => {
  it('round-trips canonical bodies', () => {
    const v = { b: [1, 2.5, 'x\u00e9\n'], a: { z: null, y: true }, n: -0.001, big: 9007199254740991 };
    expect(decodeBody(encodeBody(v))).toEqual(v);
  });
  it('refuses non-canonical, duplicate, unsafe and malformed input', () => {
    expect(refuse('{"b":1,"a":2}')).toBe('struct_not_canonical');
    expect(refuse('{"a": 1}')).toBe('struct_not_canonical');
    expect(refuse('{"a":1.0}')).toBe('struct_not_canonical');
    expect(refuse('{"a":1,"a":1}')).toBe('struct_duplicate_key');
    expect(refuse('{"a":9007199254740993}')).toBe('struct_unsafe_integer');
    // 2^53 and -2^53 print back unchanged: only the safe-integer check catches them.
    expect(refuse('{"a":9007199254740992}')).toBe('struct_unsafe_integer');
    expect(refuse('{"a":[-9007199254740992]}')).toBe('struct_unsafe_integer');
    expect(refuse('{"a":-9007199254740991}')).toBe('accepted');
    expect(refuse('{"a":"\\ud800"}')).toBe('struct_invalid_json');
    expect(refuse(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))).toBe('struct_invalid_utf8');
    expect(refuse('{"a":1}x')).toBe('struct_invalid_json');
  });
  it('reads a text body (a thread port delivers text) exactly as strictly as its bytes', () => {
    const cases = [
      '{"b":1,"a":2}',
      '{"a": 1}',
      '{"a":1.0}',
      '{"a":1,"a":1}',
      '{"a":9007199254740993}',
      '{"a":9007199254740992}',
      '{"a":-9007199254740991}',
      '{"a":"\\ud800"}',
      '{"a":1}x',
      '{"a":"x\u00e9\\n"}',
    ];
    for (const c of cases) expect(refuse(c, 'text'), c).toBe(refuse(c, 'bytes'));
    // A JS string can hold what no UTF-8 body can: a lone surrogate, refused, never replaced.
    expect(refuse('{"a":"\ud800"}', 'text')).not.toBe('accepted');
    expect(refuse('{"a":"\ufffd"}', 'text')).toBe('accepted');
    expect(decodeBody(encodeBody({ a: [1, 'é'] }))).toEqual({ a: [1, 'é'] });
    expect(typeof encodeBody({ a: 1 })).toBe('string');
  });
  it("a body printed here (a worker thread's requests, an inline worker) is not proven canonical again, but an unsafe integer is still refused; what canonicalize prints reads the same either way", () => {
    const printed = (text: string) => {
      try {
        decodeBody(text, true);
      } catch (e) {
        return (e as { reason?: string }).reason;
      }
      return 'accepted';
    };
    // The proof is skipped (the flag has an effect): texts canonicalize never prints pass unproven.
    expect(refuse('{"b":1,"a":2}', 'text')).toBe('struct_not_canonical');
    expect(printed('{"b":1,"a":2}')).toBe('accepted');
    // canonicalize prints an integer past 2^53 unchanged; the protocol still refuses it.
    expect(printed('{"a":9007199254740993}')).toBe('struct_unsafe_integer');
    expect(printed('{"a":[-9007199254740992]}')).toBe('struct_unsafe_integer');
    expect(printed('{"a":1}x')).toBe('struct_invalid_json');
    const values = [
      { b: [1, 2.5, 'x\u00e9\n'], a: { z: null, y: true }, n: -0.001, big: 9007199254740991 },
      {
        method: 'Agent.Commit',
        params: { agents: [{ agentId: 'w-00', observation: { '\u00e9': 1, a: [0.1, 1e21] } }] },
      },
      [[[[{ deep: ['\u2028', '"', '\\'] }]]]],
    ];
    for (const v of values) expect(decodeBody(encodeBody(v), true)).toEqual(decodeBody(encodeBody(v)));
  });
});
