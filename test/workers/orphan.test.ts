// A worker whose parent dies (SIGKILL, no cleanup) exits by itself: its stdin pipe closes and
// its parent pid changes — even while model code blocks its event loop (its watchdog thread).
// This is the worker's half of "no orphan processes"; the launcher's parent-death signal is the other.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { METHODS, WorkerClient } from '../../core/protocol/index.js';
import { isRunning } from '../coordinator/helpers.js';
import { REPO_ROOT, STEP_60HZ, resultOf, scope, SESSION } from './harness.js';

/**
 * A parent that spawns a worker directly (no launcher, so no parent-death signal) with a stdin pipe
 * as the launcher does, relays its ready line and stderr, then waits.
 */
async function workerUnderParent(
  sock: string,
  workerId: string,
  models: string[] = [],
): Promise<{ parent: ChildProcess; pid: number; stderr: () => string }> {
  const script = `
    const { spawn } = require('node:child_process');
    const w = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', '--listen', 'unix:${sock}', '--role', 'agent', '--worker-id', '${workerId}'${models.map((m) => `, '--model', ${JSON.stringify(m)}`).join('')}], { stdio: ['pipe', 'pipe', 'inherit'] });
    w.stdout.on('data', (d) => process.stdout.write(d));
    setInterval(() => {}, 1000);`;
  const parent = spawn(process.execPath, ['-e', script], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  parent.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const line = await new Promise<string>((res) => createInterface({ input: parent.stdout! }).once('line', res));
  return { parent, pid: (JSON.parse(line) as { pid: number }).pid, stderr: () => stderr };
}

describe('orphan guard', () => {
  it('a worker exits when its parent is SIGKILLed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dso-'));
    const sock = join(dir, 'w.sock');
    const { parent, pid } = await workerUnderParent(sock, 'orph');
    expect(isRunning(pid)).toBe(true);
    parent.kill('SIGKILL');
    const deadline = Date.now() + 15_000;
    while (isRunning(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const gone = !isRunning(pid);
    if (!gone) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    expect(gone).toBe(true);
  });

  it('a worker spinning in model code (event loop blocked) exits when its parent is SIGKILLed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dso-'));
    const sock = join(dir, 'w.sock');
    const model = join(REPO_ROOT, 'test/coordinator/fixtures/spin-forever.ts');
    const { parent, pid, stderr } = await workerUnderParent(sock, 'spin', [model]);
    const client = await WorkerClient.connect(`unix:${sock}`, { label: 'spin' });
    await client.hello({ sessionId: SESSION, workerId: 'spin', role: 'agent' });
    resultOf(
      await client.call(METHODS.agentInitialize, scope(0), {
        agents: [{ agentId: 'sp', model, params: {}, seed: 1, stepDuration: STEP_60HZ, observation: {} }],
      }),
    );
    void client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'sp' }] }).catch(() => undefined);
    const spinning = Date.now() + 30_000;
    while (!stderr().includes('spinning in prepare') && Date.now() < spinning)
      await new Promise((r) => setTimeout(r, 50));
    expect(stderr()).toContain('spinning in prepare');
    parent.kill('SIGKILL');
    const deadline = Date.now() + 10_000;
    while (isRunning(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const gone = !isRunning(pid);
    if (!gone) process.kill(pid, 'SIGKILL');
    client.close();
    rmSync(dir, { recursive: true, force: true });
    expect(gone).toBe(true);
  });
});
