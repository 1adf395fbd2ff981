// Model resolution: a built-in name (walker, lif, forage) or a path to a module written with the
// SDK (default export or `model` export). Not the runtime; it only finds and checks the module.
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AgentModel, EnvironmentModel } from '../sdk.js';
import { forage } from './forage.js';
import { lif } from './lif.js';
import { walker } from './walker.js';

export const BUILTIN_AGENT_MODELS: Record<string, AgentModel<unknown>> = { walker: walker as AgentModel<unknown>, lif: lif as AgentModel<unknown> };
export const BUILTIN_ENVIRONMENT_MODELS: Record<string, EnvironmentModel<unknown>> = { forage: forage as EnvironmentModel<unknown> };

export interface ResolvedModel<M> {
  model: M;
  builtin: boolean;
}

function looksLikePath(spec: string): boolean {
  return spec.includes('/') || spec.endsWith('.js') || spec.endsWith('.ts') || spec.endsWith('.mjs');
}

async function importModel(spec: string, kind: 'agent' | 'environment'): Promise<unknown> {
  const path = isAbsolute(spec) ? spec : resolve(process.cwd(), spec);
  const mod = (await import(pathToFileURL(path).href)) as { default?: unknown; model?: unknown };
  const model = mod.default ?? mod.model;
  if (!model || typeof model !== 'object' || (model as { kind?: unknown }).kind !== kind) {
    throw new Error(`model ${spec}: the module must export (default or \`model\`) an ${kind} model made with define${kind === 'agent' ? 'Agent' : 'Environment'}Model`);
  }
  return model;
}

export async function resolveAgentModel(spec: string): Promise<ResolvedModel<AgentModel<unknown>>> {
  const builtin = BUILTIN_AGENT_MODELS[spec];
  if (builtin) return { model: builtin, builtin: true };
  if (!looksLikePath(spec)) throw new Error(`model ${JSON.stringify(spec)}: not a built-in agent model (${Object.keys(BUILTIN_AGENT_MODELS).join(', ')}) nor a module path`);
  return { model: (await importModel(spec, 'agent')) as AgentModel<unknown>, builtin: false };
}

export async function resolveEnvironmentModel(spec: string): Promise<ResolvedModel<EnvironmentModel<unknown>>> {
  const builtin = BUILTIN_ENVIRONMENT_MODELS[spec];
  if (builtin) return { model: builtin, builtin: true };
  if (!looksLikePath(spec)) throw new Error(`model ${JSON.stringify(spec)}: not a built-in environment model (${Object.keys(BUILTIN_ENVIRONMENT_MODELS).join(', ')}) nor a module path`);
  return { model: (await importModel(spec, 'environment')) as EnvironmentModel<unknown>, builtin: false };
}
