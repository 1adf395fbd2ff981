// The `launcher` field of a run config and the checks `launcher: slurm` makes before anything starts
// (pure: no Slurm needed), plus the srun command one worker step runs and the batch script's quoting.
// NOT the real launch (test/cluster/slurm.test.ts runs it against the local Slurm).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { defaultAgentsPerWorker, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { loadConfigWithOverrides } from '../../coordinator/overrides.js';
import { REPO_ROOT } from '../workers/harness.js';
import { batchScript, shellWord } from '../../coordinator/slurm/batch-script.js';
import { checkSlurmLauncher, srunCommand } from '../../coordinator/slurm/srun.js';
import { refusal } from '../refusal.js';

const base = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  sessionId: 's',
  masterSeed: '1',
  steps: 3,
  environment: { id: 'env', model: 'forage' },
  agents: { count: 2, prefix: 'a-', model: 'walker' },
  ...extra,
});

describe('config: launcher', () => {
  it('absent means local (no launcher in the plan); slurm as a word or an object with srunArgs', () => {
    expect(resolveConfig(base()).launcher).toBeUndefined();
    expect(resolveConfig(base({ launcher: 'local' })).launcher).toEqual({ kind: 'local' });
    expect(resolveConfig(base({ launcher: 'slurm' })).launcher).toEqual({ kind: 'slurm', srunArgs: [] });
    expect(resolveConfig(base({ launcher: { kind: 'slurm', srunArgs: ['--mem=1G'] } })).launcher).toEqual({
      kind: 'slurm',
      srunArgs: ['--mem=1G'],
    });
  });

  it('slurm + placement: rendezvous reaches its srun steps over tcp with a per-run TLS set unless a dir is given', () => {
    const workers = { placement: 'rendezvous', rendezvous: { dir: '/tmp/rv' } };
    const plan = resolveConfig(base({ launcher: 'slurm', workers }));
    expect([plan.transport, plan.perRunTls, plan.tls]).toEqual(['tcp', true, undefined]);
    const given = resolveConfig(base({ launcher: 'slurm', workers: { ...workers, tls: { dir: '/tmp/set' } } }));
    expect([given.perRunTls, given.tls]).toEqual([undefined, { dir: '/tmp/set' }]);
    // `workers.tls: {}` asks for a per-run set with the local launcher too (tcp); hand-started workers need a dir.
    expect(resolveConfig(base({ workers: { transport: 'tcp', tls: {} } })).perRunTls).toBe(true);
    const byHand = refusal(() => resolveConfig(base({ workers: { ...workers, tls: {} } })));
    expect([byHand.reason, byHand.field]).toEqual(['struct_missing_field', 'workers.tls.dir']);
    // A TLS block without a transport means tcp (a per-run set, locally too); a named unix is refused.
    const local = resolveConfig(base({ workers: { tls: {} } }));
    expect([local.transport, local.perRunTls]).toEqual(['tcp', true]);
    const unixTls = refusal(() => resolveConfig(base({ workers: { transport: 'unix', tls: {} } })));
    expect([unixTls.reason, unixTls.field]).toEqual(['struct_invalid_field', 'workers.transport']);
    // A plaintext rendezvous config run with --launcher slurm: its steps would listen beyond loopback without TLS.
    const plain = { ...resolveConfig(base({ workers })), launcher: { kind: 'slurm' as const, srunArgs: [] } };
    const e = refusal(() => checkSlurmLauncher(plain, { SLURM_JOB_ID: '7' }));
    expect([e.reason, e.field]).toEqual(['struct_invalid_field', 'workers.tls']);
  });

  it('refuses an unknown launcher, srun flags on a local launcher, slurm with thread or unix rendezvous workers, naming the field', () => {
    expect(refusal(() => resolveConfig(base({ launcher: 'pbs' }))).field).toBe('launcher');
    const local = refusal(() => resolveConfig(base({ launcher: { kind: 'local', srunArgs: ['-x'] } })));
    expect([local.reason, local.field]).toEqual(['struct_invalid_field', 'launcher.srunArgs']);
    for (const transport of ['thread', 'inline']) {
      const inside = refusal(() => resolveConfig(base({ launcher: 'slurm', workers: { transport } })));
      expect([inside.reason, inside.field, inside.message]).toEqual([
        'struct_invalid_field',
        'launcher',
        `launcher: slurm starts worker processes with srun; workers.transport: ${transport} runs them in the coordinator`,
      ]);
    }
    const rv = refusal(() =>
      resolveConfig(
        base({
          launcher: 'slurm',
          workers: { transport: 'unix', placement: 'rendezvous', rendezvous: { dir: '/tmp/rv' } },
        }),
      ),
    );
    expect([rv.reason, rv.field]).toEqual(['struct_invalid_field', 'workers.transport']);
    const typo = refusal(() => resolveConfig(base({ launcher: { kind: 'slurm', srunArg: [] } })));
    expect([typo.reason, typo.field]).toEqual(['struct_unknown_field', 'launcher.srunArg']);
  });
});

describe('launcher: slurm checks and commands', () => {
  const slurmPlan = (): RunPlan => resolveConfig(base({ launcher: 'slurm' }));

  it('is refused outside an allocation (SLURM_JOB_ID unset), and with --transport thread or inline inside one', () => {
    const e = refusal(() => checkSlurmLauncher(slurmPlan(), {}));
    expect([e.reason, e.field]).toEqual(['perm_slurm_no_allocation', 'launcher']);
    // The way on for a resume too (its job was cancelled): inside an allocation of the plan's workers.
    expect(e.message).toContain(
      `salloc --ntasks=${slurmPlan().workers.length} detsim …\`: a resume of a Slurm run too`,
    );
    for (const transport of ['thread', 'inline'] as const) {
      const t = refusal(() => checkSlurmLauncher({ ...slurmPlan(), transport }, { SLURM_JOB_ID: '7' }));
      expect([t.reason, t.field]).toEqual(['struct_invalid_field', 'launcher']);
    }
    // A local plan needs nothing from Slurm.
    expect(() => checkSlurmLauncher(resolveConfig(base()), {})).not.toThrow();
  });

  it('one worker is one srun step: one task on one node, its CPUs exactly, the config srunArgs before the command', () => {
    const worker = slurmPlan().workers[1]!;
    const cmd = srunCommand({ command: '/usr/bin/node', args: ['w.js'] }, worker, ['--mem=1G']);
    expect(cmd).toEqual({
      command: 'srun',
      args: [
        '--nodes=1',
        '--ntasks=1',
        '--exact',
        '--overlap',
        '--kill-on-bad-exit=1',
        '--job-name=worker-0',
        '--mem=1G',
        '/usr/bin/node',
        'w.js',
      ],
    });
  });

  it('the batch script quotes every word the shell would split or expand', () => {
    expect(shellWord('/a/b.yaml')).toBe('/a/b.yaml');
    expect(shellWord("it's $HOME")).toBe(`'it'\\''s $HOME'`);
    const script = batchScript({
      configPath: '/c/my run.yaml',
      sessionId: 's',
      workers: 3,
      outDir: '/o',
      workDir: '/w',
      node: '/n',
      cli: '/m.js',
      runArgs: ['--steps', '4'],
    });
    expect(script.split('\n').at(-2)).toBe(
      "exec /n --v8-pool-size=0 /m.js run '/c/my run.yaml' --launcher slurm --out /o --steps 4",
    );
  });
});

describe('--launcher slurm and detsim slurm submit read the config as if it named Slurm', () => {
  it("the example's 16 agents go in groups of four, whatever the submitting machine's cores", () => {
    const example = join(REPO_ROOT, 'examples', 'forage-walkers.yaml');
    const asSlurm = loadConfigWithOverrides(example, [], 'slurm');
    expect(asSlurm.launcher?.kind).toBe('slurm');
    expect(asSlurm.transport).toBe('unix');
    expect(asSlurm.workers.filter((w) => w.role === 'agent').map((w) => w.agentIds.length)).toEqual([4, 4, 4, 4]);
    // Control: read plainly, the layout is this machine's (one agent worker per spare core, at least groups of 4).
    const local = loadConfigWithOverrides(example, []);
    expect(local.workers.filter((w) => w.role === 'agent').length).toBe(
      Math.ceil(16 / defaultAgentsPerWorker({} as never, 16)),
    );
  });
});
