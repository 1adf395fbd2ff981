// A worker whose parent dies (SIGKILL, no cleanup) exits by itself: its stdin pipe closes and
// its parent pid changes. This is the worker's half of "no orphan processes".
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './harness.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('orphan guard', () => {
  it('a worker exits when its parent is SIGKILLed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dso-'));
    const sock = join(dir, 'w.sock');
    // The parent spawns the worker with a stdin pipe (as the launcher does), relays its ready line, then waits.
    const script = `
      const { spawn } = require('node:child_process');
      const w = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', '--listen', 'unix:${sock}', '--role', 'agent', '--worker-id', 'orph'], { stdio: ['pipe', 'pipe', 'inherit'] });
      w.stdout.on('data', (d) => process.stdout.write(d));
      setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ['-e', script], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((res) => createInterface({ input: parent.stdout! }).once('line', res));
    const pid = (JSON.parse(line) as { pid: number }).pid;
    expect(alive(pid)).toBe(true);
    parent.kill('SIGKILL');
    const deadline = Date.now() + 15_000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const gone = !alive(pid);
    if (!gone) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    expect(gone).toBe(true);
  });
});
