#!/usr/bin/env node
// Plan-time param check of TypeScript/JavaScript model modules, in a child process the coordinator
// starts before any run directory is made (it never imports user code itself; coordinator/launch/module-probe.ts):
// argv[2] = JSON [{kind, path, params, field}]; for each, the module is loaded as a worker loads it and
// its params go through the same resolveModelParams (resolveParams, or acceptedParams). Prints one JSON
// line, the refusals [{field, param, message, unknown}] (a module that fails to load: param "model").
// With `--fork` first, argv[3] = JSON [{kind, path, field, before, after}]: each participant's params
// resolved before and after a fork and its model's forkParams (see forkParams below).
// NOT a worker: no protocol, no state.
import { ParamError, resolveModelParams, type ParamObject, type ResolvableModel } from '../core/models/params.js';
import { resolveAgentModel, resolveEnvironmentModel } from './models/registry.js';

interface Check {
  kind: 'agent' | 'environment';
  path: string;
  params: ParamObject;
  field: string;
}

/** `--fork`: a participant whose params a fork changes, before (as its checkpoint holds them) and after. */
interface ForkCheck {
  kind: 'agent' | 'environment';
  path: string;
  field: string;
  before: ParamObject;
  after: ParamObject;
}

type Loaded = { model: ResolvableModel } | { refused: { param: string; message: string } };

async function load(kind: 'agent' | 'environment', path: string): Promise<Loaded> {
  try {
    const resolve = kind === 'agent' ? resolveAgentModel : resolveEnvironmentModel;
    return { model: (await resolve(path, [path])).model };
  } catch (e) {
    return { refused: { param: 'model', message: `model: ${(e as Error).message}` } };
  }
}

/** The plan-time check: the refusals [{field, param, message, unknown}]. */
async function checkParams(checks: Check[]): Promise<unknown[]> {
  const refused: { field: string; param: string | null; message: string; unknown: boolean }[] = [];
  for (const c of checks) {
    const loaded = await load(c.kind, c.path);
    if ('refused' in loaded) {
      refused.push({ field: c.field, ...loaded.refused, unknown: false });
      continue;
    }
    try {
      resolveModelParams(loaded.model, c.params);
    } catch (e) {
      const param = e instanceof ParamError ? e.param : null;
      refused.push({
        field: c.field,
        param,
        message: (e as Error).message,
        unknown: e instanceof ParamError && e.unknown,
      });
    }
  }
  return refused;
}

/**
 * `--fork`: per participant, its params resolved before and after and the model's `forkParams`
 * [{field, before, after, forkParams}], or [{field, refused: {param, message}}] when the module does
 * not load or refuses the new params (what coordinator/checkpoint/fork-rebind.ts needs of a module).
 */
async function forkParams(checks: ForkCheck[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const c of checks) {
    const loaded = await load(c.kind, c.path);
    if ('refused' in loaded) {
      out.push({ field: c.field, refused: loaded.refused });
      continue;
    }
    try {
      const before = resolveModelParams(loaded.model, c.before);
      const after = resolveModelParams(loaded.model, c.after);
      out.push({ field: c.field, before, after, forkParams: loaded.model.forkParams ?? [] });
    } catch (e) {
      const param = e instanceof ParamError ? e.param : 'params';
      out.push({ field: c.field, refused: { param, message: (e as Error).message } });
    }
  }
  return out;
}

const result =
  process.argv[2] === '--fork'
    ? await forkParams(JSON.parse(process.argv[3] ?? '[]') as ForkCheck[])
    : await checkParams(JSON.parse(process.argv[2] ?? '[]') as Check[]);
process.stdout.write(`${JSON.stringify(result)}\n`);
