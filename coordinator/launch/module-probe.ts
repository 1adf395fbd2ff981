// The plan-time param check of a run's TypeScript/JavaScript model modules (issue #27: params are
// used or refused): one child process (workers/check-params-main.ts, started like a TypeScript worker)
// loads each module and runs its params through resolveParams / acceptedParams, so a param the model
// does not take is refused naming it before any run directory is made. Only runs that give a module
// model params pay its start-up (~0.1 s). The same child, in its `--fork` mode, tells a fork that
// changes a module model's params what the module resolves them to and which it accepts
// (moduleForkParams). NOT the built-in models' rules (config.ts checks those itself).
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

/** Run workers/check-params-main with `args` the way `worker` starts a TypeScript worker; its one JSON line. */
function runChecker(worker: { command: string; args: string[] }, args: string[]): unknown {
  const main = worker.args.at(-1)!;
  const entry = join(dirname(main), basename(main).replace(/^main\./, 'check-params-main.'));
  const r = spawnSync(worker.command, [...worker.args.slice(0, -1), entry, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0 || r.error)
    throw new DetsimError(
      'struct_unknown_model',
      `model params could not be checked: ${(r.stderr || String(r.error)).trim().split('\n')[0]}`,
    );
  return JSON.parse(r.stdout) as unknown;
}

/** Refuse, naming the field, a param a module model does not accept; `worker`: how a TypeScript worker starts. */
export function checkModuleParams(plan: RunPlan, worker: { command: string; args: string[] }): void {
  const checks = checksOf(plan);
  if (checks.length === 0) return;
  refuseParams(runChecker(worker, [JSON.stringify(checks)]) as Refused[]);
}

/** A participant of a fork whose model is a module: its params before (at the checkpoint) and after. */
export interface ModuleForkCheck {
  kind: 'agent' | 'environment';
  path: string;
  field: string;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
}

/** What the module says of a fork's change: params resolved before and after and its forkParams, or its refusal. */
export type ModuleForkParams =
  | {
      field: string;
      before: { params: Record<string, unknown>; strict?: boolean };
      after: { params: Record<string, unknown>; strict?: boolean };
      forkParams: string[];
    }
  | { field: string; refused: { param: string; message: string } };

/**
 * For `detsim fork --set …params…` of module models: each module loaded in the same child process
 * as the plan-time check (`--fork` mode), its params resolved before and after, and its forkParams.
 */
export function moduleForkParams(
  checks: readonly ModuleForkCheck[],
  worker: { command: string; args: string[] },
): ModuleForkParams[] {
  if (checks.length === 0) return [];
  return runChecker(worker, ['--fork', JSON.stringify(checks)]) as ModuleForkParams[];
}
