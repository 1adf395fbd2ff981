// The soak suite's memory verdict (bench/suites/soak.ts soakVerdict): flat, settled (a start-up
// climb, then a plateau) or growing (still climbing at the end). Hand-made quarter means; nothing is run.
import { describe, expect, it } from 'vitest';
import { soakVerdict } from '../../bench/suites/soak.js';

describe('soak: the memory verdict', () => {
  it('flat when the last quarter is within 10% of the first', () => {
    expect(soakVerdict({ first: 200, third: 205, last: 219 })).toBe('flat');
  });

  it('settled when memory climbed at start-up and the last quarter equals the third (the 1M run: 224 / 260 / 282 / 282 MiB)', () => {
    expect(soakVerdict({ first: 224, third: 282, last: 282 })).toBe('settled');
    expect(soakVerdict({ first: 224, third: 276, last: 282 })).toBe('settled');
  });

  it('growing when it still climbs in the last quarter (a leak: linear growth)', () => {
    expect(soakVerdict({ first: 100, third: 300, last: 400 })).toBe('growing');
    expect(soakVerdict({ first: 224, third: 270, last: 282 })).toBe('growing');
  });
});
