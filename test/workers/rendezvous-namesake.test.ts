// A hand-started worker given the id of one that is live in the same rendezvous directory is
// refused (ident_rendezvous_taken, exit 2) and leaves the live worker's record alone — it used to
// replace it, then remove it on its way out, so the live worker could no longer be found. A record
// whose worker is gone (SIGKILL) is stale and is replaced. Real worker processes: the built
// TypeScript CLI and the Python worker, the same refusal from both.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';
import { tmpDir } from '../checkpoint/harness.js';
import { pythonCommand, pythonWorkerSkip } from '../cross-lang/python-worker.js';

const dir = tmpDir('detsim-rv-namesake-');
const token = join(dir, 'token');
writeFileSync(token, 'b'.repeat(40));
const started: ChildProcess[] = [];
afterAll(() => {
  for (const p of started) p.kill('SIGKILL');
});

type Runtime = { name: string; command: () => { command: string; args: string[] }; skip: string | null };
const RUNTIMES: Runtime[] = [
  { name: 'TypeScript', command: () => ({ command: process.execPath, args: [CLI_MAIN, 'worker'] }), skip: null },
  { name: 'Python', command: pythonCommand, skip: pythonWorkerSkip },
];

describe.each(RUNTIMES)('two hand-started $name workers of one id in one rendezvous directory', (rt) => {
  it.skipIf(rt.skip !== null)(
    'the second is refused while the first answers, its record kept; after the first is killed, it replaces the stale record',
    async () => {
      const rv = join(dir, rt.name);
      mkdirSync(rv);
      const { command, args } = rt.command();
      const all = [
        ...args,
        ...['--listen', '127.0.0.1:0', '--role', 'agent', '--worker-id', 'worker-1', '--session', 's1'],
        ...['--token-file', token, '--rendezvous', rv],
      ];
      const startWorker = (): Promise<{ p: ChildProcess; listen: string }> => {
        const p = spawn(command, all, { stdio: ['ignore', 'pipe', 'pipe'] });
        started.push(p);
        return new Promise((res) =>
          createInterface({ input: p.stdout! }).once('line', (l) =>
            res({ p, listen: (JSON.parse(l) as { listen: string }).listen }),
          ),
        );
      };
      const first = await startWorker();
      const record = join(rv, 'worker-1.json');
      const before = readFileSync(record);
      const second = spawnSync(command, all, { encoding: 'utf8', timeout: 60_000 });
      expect(second.status).toBe(2);
      expect(second.stderr).toBe(
        `detsim: [ident_rendezvous_taken] --worker-id worker-1: ${record} names a worker of this id that answers at ${first.listen}; stop it first, or start this one with another --worker-id\n`,
      );
      expect(readFileSync(record)).toEqual(before);
      expect(first.p.exitCode).toBeNull();
      first.p.kill('SIGKILL');
      await new Promise((r) => first.p.once('exit', r));
      const third = await startWorker();
      expect((JSON.parse(readFileSync(record, 'utf8')) as { address: string }).address).toBe(third.listen);
    },
    120_000,
  );
});
