#!/usr/bin/env node
// Plan-time param check of TypeScript/JavaScript model modules, in a child process the coordinator
// starts before any run directory is made (it never imports user code itself; coordinator/launch/module-probe.ts):
// argv[2] = JSON [{kind, path, params, field}]; for each, the module is loaded as a worker loads it and
// its params go through the same resolveModelParams (resolveParams, or acceptedParams). Prints one JSON
// line, the refusals [{field, param, message, unknown}] (a module that fails to load: param "model").
// NOT a worker: no protocol, no state.
import { ParamError, resolveModelParams, type ParamObject } from '../core/models/params.js';
import { resolveAgentModel, resolveEnvironmentModel } from './models/registry.js';

interface Check {
  kind: 'agent' | 'environment';
  path: string;
  params: ParamObject;
  field: string;
}

const refused: { field: string; param: string | null; message: string; unknown: boolean }[] = [];
for (const c of JSON.parse(process.argv[2] ?? '[]') as Check[]) {
  let model;
  try {
    const resolve = c.kind === 'agent' ? resolveAgentModel : resolveEnvironmentModel;
    model = (await resolve(c.path, [c.path])).model;
  } catch (e) {
    refused.push({ field: c.field, param: 'model', message: `model: ${(e as Error).message}`, unknown: false });
    continue;
  }
  try {
    resolveModelParams(model, c.params);
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
process.stdout.write(`${JSON.stringify(refused)}\n`);
