// Protocol fuzz, bounded for CI: random and mutated request envelopes, non-JSON bodies and bad
// framing sent over real gRPC, and over the socket wire, to a real TypeScript worker process (bench/protocol-fuzz.ts does the
// work; run it there for thousands of cases). Every request gets one reply, a result or a named
// error; bad framing ends only its stream; the worker stays up and answers a fresh Hello/Status;
// its peak RSS stays bounded; a module named by a client (a marker whose import writes a file) is
// never imported. The fast-check seed is random each run and printed on failure.
import { afterAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../core/protocol/index.js';
import { runProtocolFuzz } from '../../bench/protocol-fuzz.js';
import { stopAll } from '../workers/harness.js';

afterAll(stopAll);

describe('protocol fuzz against a real worker', () => {
  for (const [role, cases, wire] of [
    ['agent', 50, 'grpc'],
    ['environment', 30, 'grpc'],
    ['agent', 40, 'socket'],
    ['environment', 20, 'socket'],
  ] as const) {
    it(`${role} worker over ${wire}: ${cases} random cases, every refusal named, never crashes, hangs, grows or executes`, async () => {
      const report = await runProtocolFuzz({ cases, role, wire, maxPeakRssMiB: 512 });
      expect(report.cases).toBe(cases); // the fixed code-execution probe first, then random ones
      expect(Object.keys(report.codes).every((c) => (ERROR_CODES as readonly string[]).includes(c))).toBe(true);
      expect(report.replies).toBeGreaterThan(cases);
      expect(report.peakRssMiB).toBeLessThan(512);
    }, 60_000);
  }
});
