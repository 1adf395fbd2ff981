// A worker whose --listen address is taken (another worker on that port) is refused in one line,
// [perm_listen_failed] naming the address, exit 2 — not grpc-js's log line and stack trace. The
// first worker keeps serving. Real processes, the built CLI.
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';
import { tmpDir } from '../checkpoint/harness.js';

const dir = tmpDir('detsim-listen-in-use-');
const token = join(dir, 'token');
writeFileSync(token, 'a'.repeat(40));
const args = (listen: string) => [
  CLI_MAIN,
  'worker',
  '--listen',
  listen,
  '--role',
  'agent',
  '--worker-id',
  'worker-0',
  '--session',
  's1',
  '--token-file',
  token,
];
const first = spawn(process.execPath, args('127.0.0.1:0'), { stdio: ['ignore', 'pipe', 'pipe'] });
afterAll(() => {
  first.kill('SIGKILL');
});

describe('a worker on an address already in use', () => {
  it('is refused in one line naming the address, exit 2; the worker there keeps serving', async () => {
    const ready = await new Promise<{ listen: string }>((res) =>
      createInterface({ input: first.stdout! }).once('line', (l) => res(JSON.parse(l) as { listen: string })),
    );
    const second = spawnSync(process.execPath, args(ready.listen), { encoding: 'utf8', timeout: 60_000 });
    expect(second.status).toBe(2);
    expect(second.stderr).toBe(
      `detsim: [perm_listen_failed] --listen ${ready.listen}: cannot listen there: the address is already in use (another worker, or another program, listens on it; pick another port)\n`,
    );
    expect(first.exitCode).toBeNull();
  }, 90_000);
});
