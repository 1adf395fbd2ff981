// The store id (core/protocol/store-id.ts) in all three workers, alike: started with `--store-dir S
// --store-id T`, a worker offers store-files-v1 (it reads and writes the store's files) only when
// S/store-id is a regular file holding exactly T.
// Otherwise (no file, another token, a trailing newline, a symlink to the right token) it runs as
// if it had no store and says so in one stderr line. Bad flags are one line and exit 2.
// The end-to-end fallback (a fleet whose workers see another directory) is in
// test/checkpoint/store-id.test.ts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES } from '../../core/protocol/index.js';
import { SESSION } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';
import { commandOf, ensureRustWorker, rustWorkerSkip, spawnAgentWorker, stopAllWorkers } from './rust-worker.js';

afterAll(stopAllWorkers);

const TOKEN = '0123456789abcdef0123456789abcdef';
/** A worker's capabilities with the run's store, and without (the others are the same). */
const WITH_STORE = [
  CAPABILITIES.agentStep,
  CAPABILITIES.captureHoldFrom,
  CAPABILITIES.checkpoint,
  CAPABILITIES.storeFiles,
];
const WITHOUT_STORE = [CAPABILITIES.agentStep, CAPABILITIES.checkpoint];
const RUNTIMES = [
  { runtime: 'typescript', skip: null, ensure: () => undefined },
  { runtime: 'rust', skip: rustWorkerSkip, ensure: ensureRustWorker },
  { runtime: 'python', skip: pythonWorkerSkip, ensure: ensurePythonWorker },
] as const;

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'detsim-store-id-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A store directory whose store-id file is made by `make` (nothing: no file). */
function storeWith(name: string, make: (file: string) => void = () => undefined): string {
  const dir = join(root, name);
  spawnSync('mkdir', ['-p', dir]);
  make(join(dir, 'store-id'));
  return dir;
}

for (const r of RUNTIMES)
  describe.skipIf(r.skip !== null)(`the ${r.runtime} worker and --store-id`, () => {
    beforeAll(() => r.ensure(), 1_500_000);

    async function helloWith(extra: string[]): Promise<{ capabilities: string[]; stderr: string }> {
      const w = await spawnAgentWorker(r.runtime, 'w-1', extra);
      const hello = await w.client.hello({ sessionId: SESSION, workerId: 'w-1', role: 'agent' });
      const stderr = w.stderr();
      await w.stop();
      return { capabilities: hello.capabilities, stderr };
    }

    it('uses the store only when its store-id file holds exactly the token', async () => {
      const right = storeWith(`${r.runtime}-right`, (f) => writeFileSync(f, TOKEN));
      expect(await helloWith(['--store-dir', right, '--store-id', TOKEN])).toEqual({
        capabilities: WITH_STORE,
        stderr: '',
      });
      // Without --store-id the worker trusts --store-dir as given (a worker started by hand).
      expect((await helloWith(['--store-dir', storeWith(`${r.runtime}-bare`)])).capabilities).toEqual(WITH_STORE);
      const elsewhere = join(root, `${r.runtime}-token-elsewhere`);
      writeFileSync(elsewhere, TOKEN);
      const notIt = {
        'no store-id file': storeWith(`${r.runtime}-none`),
        'another token': storeWith(`${r.runtime}-other`, (f) => writeFileSync(f, 'f'.repeat(32))),
        'the token and a newline': storeWith(`${r.runtime}-newline`, (f) => writeFileSync(f, `${TOKEN}\n`)),
        'a symlink to the token': storeWith(`${r.runtime}-symlink`, (f) => symlinkSync(elsewhere, f)),
        'a directory that does not exist': join(root, `${r.runtime}-missing`),
      };
      for (const [what, dir] of Object.entries(notIt)) {
        const got = await helloWith(['--store-dir', dir, '--store-id', TOKEN]);
        expect(got.capabilities, what).toEqual(WITHOUT_STORE);
        expect(got.stderr.trim().split('\n'), what).toEqual([
          `detsim worker w-1: --store-dir ${dir} does not hold this run's store id (not the coordinator's store here); checkpoint payloads travel as attachments`,
        ]);
      }
    });

    it('refuses a malformed --store-id, or one without --store-dir, with one line and exit 2', () => {
      const { command, args } = commandOf(r.runtime);
      const base = [...args, '--listen', `unix:${join(root, 'never.sock')}`, '--role', 'agent', '--worker-id', 'w-1'];
      for (const [extra, message] of [
        [['--store-dir', root, '--store-id', TOKEN.toUpperCase()], '--store-id must be 32 lowercase hex digits'],
        [['--store-id', TOKEN], '--store-id names the token of a --store-dir; give both'],
      ] as const) {
        const out = spawnSync(command, [...base, ...extra], { encoding: 'utf8' });
        expect(out.status, extra.join(' ')).toBe(2);
        expect(out.stdout).toBe('');
        expect(out.stderr).toBe(`detsim: [struct_invalid_field] ${message}\n`);
      }
    });
  });
