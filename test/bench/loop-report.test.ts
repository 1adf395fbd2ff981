// The bench loops' shared command-line side (bench/lib/loop-report.ts): the summary line says the
// count, time, facts and failures (the pass note only when nothing failed), the exit code is 1 when
// any iteration failed, and a flag's value is the word after it.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flagValue, reportLoop, summaryLine } from '../../bench/lib/loop-report.js';

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = 0;
});

describe('loop report', () => {
  it('the summary line: the pass note only when nothing failed', () => {
    const base = { name: 'recover-kill-loop', count: 3, unit: 'iterations', seconds: 12.34, facts: ['7 recoveries'] };
    expect(summaryLine({ ...base, failed: 0, passNote: 'DIFF=0' })).toBe(
      'recover-kill-loop: 3 iterations in 12.3 s, 7 recoveries, 0 failed, DIFF=0',
    );
    expect(summaryLine({ ...base, failed: 1, passNote: 'DIFF=0' })).toBe(
      'recover-kill-loop: 3 iterations in 12.3 s, 7 recoveries, 1 failed',
    );
  });

  it('reportLoop prints one line on stdout and exits 1 when an iteration failed, 0 otherwise', async () => {
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    await reportLoop('resume-kill-loop', async () => [{ ok: true }, { ok: false }], { failed: (i) => !i.ok });
    expect(process.exitCode).toBe(1);
    await reportLoop('resume-kill-loop', async () => [{ ok: true }], { failed: (i) => !i.ok, passNote: 'DIFF=0' });
    expect(process.exitCode).toBe(0);
    expect(out.map((l) => l.replace(/in [0-9.]+ s/, 'in T s'))).toEqual([
      'resume-kill-loop: 2 iterations in T s, 1 failed\n',
      'resume-kill-loop: 1 iterations in T s, 0 failed, DIFF=0\n',
    ]);
  });

  it('flagValue: the word after the flag, or undefined', () => {
    expect(flagValue('--seed', ['--iterations', '4', '--seed', '9'])).toBe('9');
    expect(flagValue('--kills', ['--iterations', '4'])).toBeUndefined();
  });
});
