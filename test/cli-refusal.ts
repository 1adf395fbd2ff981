// Test helper: run the built CLI (`node dist/coordinator/cli/main.js`, as an installed detsim runs)
// and assert a refusal the way the README promises it: exit 2 (1 for a file that failed
// verification: an audit_… reason), nothing on stdout, and exactly one stderr line
// `detsim: [reason] <field>: …` naming the field. Not a test itself.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { expect } from 'vitest';

export const CLI_MAIN = 'dist/coordinator/cli/main.js';

export function detsimCli(args: string[], timeoutMs = 60_000): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', timeout: timeoutMs });
}

/** The CLI refused with `reason`, naming `field` at the start of its one-line message. */
export function expectCliRefusal(r: SpawnSyncReturns<string>, reason: string, field: string): string {
  expect(r.error, 'the CLI did not finish (timed out?)').toBeUndefined();
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]!.startsWith(`detsim: [${reason}] ${field}`), lines[0]).toBe(true);
  expect(r.stdout).toBe('');
  // A file (or participant) that failed verification exits 1; bad input exits 2 (README, "exit").
  expect(r.status).toBe(reason.startsWith('audit_') ? 1 : 2);
  return lines[0]!;
}
