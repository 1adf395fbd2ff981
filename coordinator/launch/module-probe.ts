// The plan-time param check of a run's TypeScript/JavaScript model modules (issue #27: params are
// used or refused): one child process (workers/check-params-main.ts, started like a TypeScript worker)
// loads each module and runs its params through resolveParams / acceptedParams, so a param the model
// does not take is refused naming it before any run directory is made. Only runs that give a module
// model params pay its start-up (~0.1 s). NOT the built-in models' rules (config.ts checks those itself).
import { spawnSync } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import type { RunPlan } from '../config.js';
import { refuseParams, type Refused } from './python-runtime.js';

/** Each module model given params (strict aside): what the child checks. */
function checksOf(plan: RunPlan): { kind: string; path: string; params: Record<string, unknown>; field: string }[] {
  const all = [
    { kind: 'environment', path: plan.environment.model, params: plan.environment.params, field: 'environment' },
    ...plan.agents.map((a, i) => ({ kind: 'agent', path: a.model, params: a.params, field: `agents[${i}]` })),
  ];
  return all
    .filter((c) => c.path.startsWith('/'))
    .map(({ params, ...c }) => {
      const { strict: _strict, ...rest } = params;
      return { ...c, params: rest };
    })
    .filter((c) => Object.keys(c.params).length > 0);
}

/** Refuse, naming the field, a param a module model does not accept; `worker`: how a TypeScript worker starts. */
export function checkModuleParams(plan: RunPlan, worker: { command: string; args: string[] }): void {
  const checks = checksOf(plan);
  if (checks.length === 0) return;
  const main = worker.args.at(-1)!;
  const entry = join(dirname(main), basename(main).replace(/^main\./, 'check-params-main.'));
  const r = spawnSync(worker.command, [...worker.args.slice(0, -1), entry, JSON.stringify(checks)], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0 || r.error)
    throw new DetsimError(
      'struct_unknown_model',
      `model params could not be checked: ${(r.stderr || String(r.error)).trim().split('\n')[0]}`,
    );
  refuseParams(JSON.parse(r.stdout) as Refused[]);
}
