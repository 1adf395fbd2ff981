// The session-protocol scalars: the U64 boundary vectors of docs/spec/scalars.md,
// Id/Digest/Scope/request-id readers, and RationalNs reduction, overflow and sub-below-zero.
import { describe, expect, it } from 'vitest';
import {
  RationalNs,
  readDigest,
  readI32,
  readId,
  readRequestId,
  readScope,
  readU64,
  refuseUnknownFields,
} from '../../core/formats/scalars.js';
import { refusal } from '../refusal.js';

describe('U64 boundary vectors (docs/spec/scalars.md)', () => {
  for (const ok of ['0', '1', '18446744073709551615', '9007199254740993']) {
    it(`accepts ${JSON.stringify(ok)}`, () => expect(readU64(ok, 'f')).toBe(ok));
  }
  for (const bad of [
    '18446744073709551616',
    '184467440737095516150',
    '00',
    '01',
    '',
    '-1',
    '+1',
    '1.0',
    '1e3',
    ' 1',
    '1 ',
    '0x10',
  ]) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      const e = refusal(() => readU64(bad, 'agents[0].brainTicks'));
      expect(e.reason).toBe('struct_invalid_u64');
      expect(e.field).toBe('agents[0].brainTicks');
      expect(e.message).toMatch(/^agents\[0\]\.brainTicks: /);
    });
  }
  it('refuses a JSON number, even a small one', () =>
    expect(refusal(() => readU64(7, 'step')).reason).toBe('struct_invalid_u64'));
  it('refuses a 21-digit string without converting it', () =>
    expect(refusal(() => readU64('9'.repeat(400), 'step')).reason).toBe('struct_invalid_u64'));
});

describe('Id', () => {
  for (const ok of ['a', '0', 'fly-a', 'a.b_c-d', 'x'.repeat(64)])
    it(`accepts ${ok.slice(0, 20)}`, () => expect(readId(ok, 'id')).toBe(ok));
  for (const bad of ['', 'A', 'Fly', '-a', '.a', '_a', 'a b', 'x'.repeat(65), 'é', 'a/b', 'a\n']) {
    it(`refuses ${JSON.stringify(bad.slice(0, 20))}`, () =>
      expect(refusal(() => readId(bad, 'agentId')).reason).toBe('struct_invalid_id'));
  }
  it('refuses a non-string', () => expect(refusal(() => readId(1, 'agentId')).reason).toBe('struct_invalid_id'));
});

describe('Digest, request id, i32, Scope, unknown fields', () => {
  it('Digest: 64 lowercase hex only', () => {
    expect(readDigest('a'.repeat(64), 'd')).toBe('a'.repeat(64));
    for (const bad of ['A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), 'g'.repeat(64)])
      expect(refusal(() => readDigest(bad, 'd')).reason).toBe('struct_invalid_digest');
  });
  it('request id: req-<U64>', () => {
    expect(readRequestId('req-41', 'requestId')).toBe('req-41');
    for (const bad of ['req-01', 'req-', 'call-1', 'req-18446744073709551616', 'REQ-1'])
      expect(refusal(() => readRequestId(bad, 'requestId')).reason).toBe('struct_invalid_field');
  });
  it('i32: integers in range only', () => {
    expect(readI32(-2147483648, 'seed')).toBe(-2147483648);
    expect(readI32(2147483647, 'seed')).toBe(2147483647);
    for (const bad of [2147483648, -2147483649, 1.5, '1', NaN])
      expect(refusal(() => readI32(bad, 'seed')).reason).toBe('struct_invalid_field');
  });
  it('Scope: three fields, each checked, nothing else', () => {
    expect(readScope({ sessionId: 'demo', epoch: 'e1', step: '42' }, 'scope')).toEqual({
      sessionId: 'demo',
      epoch: 'e1',
      step: '42',
    });
    expect(refusal(() => readScope({ sessionId: 'demo', epoch: 'e1', step: 42 }, 'scope')).field).toBe('scope.step');
    expect(refusal(() => readScope({ sessionId: 'demo', epoch: 'e1' }, 'scope')).field).toBe('scope.step');
    expect(refusal(() => readScope({ sessionId: 'demo', epoch: 'e1', step: '1', stp: '1' }, 'scope')).reason).toBe(
      'struct_unknown_field',
    );
    expect(refusal(() => readScope(null, 'scope')).reason).toBe('struct_invalid_field');
  });
  it('refuseUnknownFields names the misspelled field', () => {
    const e = refusal(() => refuseUnknownFields({ seed: 1, sede: 2 }, ['seed'], 'agent'));
    expect(e.field).toBe('agent.sede');
  });
  it('refuseUnknownFields names the first unknown field in key order, whatever the insertion order', () => {
    const e = refusal(() => refuseUnknownFields({ seed: 1, zeta: 2, beta: 3 }, ['seed'], 'agent'));
    expect(e.field).toBe('agent.beta');
    expect(() => refuseUnknownFields({ seed: 1 }, ['seed', 'other'], 'agent')).not.toThrow();
  });
});

describe('RationalNs', () => {
  const r = (n: string, d: string): RationalNs => RationalNs.read({ numerator: n, denominator: d }, 't');
  it('of() reduces', () => {
    expect(RationalNs.of(6n, 4n).toJSON()).toEqual({ numerator: '3', denominator: '2' });
    expect(RationalNs.of(0n, 7n).toJSON()).toEqual({ numerator: '0', denominator: '1' });
  });
  it('read() accepts reduced forms and refuses unreduced ones (zero must be 0/1)', () => {
    expect(r('1000000', '3').toString()).toBe('1000000/3');
    expect(r('0', '1').isZero()).toBe(true);
    for (const [n, d] of [
      ['2', '4'],
      ['0', '2'],
      ['1', '0'],
    ])
      expect(refusal(() => r(n!, d!)).reason).toBe('struct_invalid_rational');
  });
  it('read() refuses numbers and unknown fields', () => {
    expect(refusal(() => RationalNs.read({ numerator: 1, denominator: '1' }, 'wt')).field).toBe('wt.numerator');
    expect(refusal(() => RationalNs.read({ numerator: '1', denominator: '1', unit: 'ns' }, 'wt')).reason).toBe(
      'struct_unknown_field',
    );
  });
  it('readDuration refuses zero', () =>
    expect(refusal(() => RationalNs.readDuration({ numerator: '0', denominator: '1' }, 'step')).reason).toBe(
      'struct_invalid_rational',
    ));
  it('add, sub, mulInt reduce exactly', () => {
    expect(r('1', '3').add(r('1', '6')).toString()).toBe('1/2');
    expect(r('1', '2').sub(r('1', '3')).toString()).toBe('1/6');
    expect(r('1', '2').sub(r('1', '2')).toJSON()).toEqual({ numerator: '0', denominator: '1' });
    expect(r('1000000', '3').mulInt(3n).toString()).toBe('1000000/1');
  });
  it('sub below zero is an error', () =>
    expect(refusal(() => r('1', '3').sub(r('1', '2'))).reason).toBe('struct_rational_overflow'));
  it('overflow beyond U64 after reduction is an error', () => {
    const max = r('18446744073709551615', '1');
    expect(refusal(() => max.add(r('1', '1'))).reason).toBe('struct_rational_overflow');
    expect(refusal(() => max.mulInt(2n)).reason).toBe('struct_rational_overflow');
    // A denominator that does not fit: 1/p + 1/q with coprime large p, q.
    expect(refusal(() => r('1', '18446744073709551557').add(r('1', '18446744073709551533'))).reason).toBe(
      'struct_rational_overflow',
    );
  });
  it('intermediates may exceed U64 when the reduced result fits', () => {
    const big = r('18446744073709551615', '2');
    expect(big.sub(r('18446744073709551613', '2')).toString()).toBe('1/1');
  });
  it('floorDiv and compare', () => {
    expect(r('7', '1').floorDiv(r('2', '1'))).toBe(3n);
    expect(r('1000000', '3').floorDiv(r('1', '1'))).toBe(333333n);
    expect(r('1', '3').compare(r('1', '2'))).toBe(-1);
    expect(r('2', '1').compare(r('2', '1'))).toBe(0);
    expect(r('1', '2').compare(r('1', '3'))).toBe(1);
  });
});
