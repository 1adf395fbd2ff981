// Model resolution: a built-in name (walker, lif, forage) or a path to a module written with the
// SDK (default export or `model` export) that the worker was launched with (`--model`). A module
// path the worker was not launched with is refused before anything imports it: importing a module
// runs its code. Not the runtime; it only finds and checks the module.
import { statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { moduleIdentity, parseModuleIdentity } from '../../core/models/identity.js';
import { pathToFileURL } from 'node:url';
import type { AgentModel, EnvironmentModel } from '../sdk.js';
import { importFailure } from './import-error.js';
import { forage } from './forage.js';
import { lif } from './lif.js';
import { walker } from './walker.js';

export const BUILTIN_AGENT_MODELS: Record<string, AgentModel<unknown>> = {
  walker: walker as AgentModel<unknown>,
  lif: lif as AgentModel<unknown>,
};
export const BUILTIN_ENVIRONMENT_MODELS: Record<string, EnvironmentModel<unknown>> = {
  forage: forage as EnvironmentModel<unknown>,
};

export interface ResolvedModel<M> {
  model: M;
  builtin: boolean;
}

function looksLikePath(spec: string): boolean {
  return spec.includes('/') || spec.endsWith('.js') || spec.endsWith('.ts') || spec.endsWith('.mjs');
}

/** A module path as the worker resolves it: absolute, against the worker's working directory. */
export function modulePathOf(spec: string): string {
  return isAbsolute(spec) ? resolve(spec) : resolve(process.cwd(), spec);
}

/** Refuse a module path that is not among `launched` (absolute paths); the message names the spec only. */
function requireLaunched(
  spec: string,
  path: string,
  launched: readonly string[],
  builtins: Record<string, unknown>,
): void {
  if (launched.includes(path)) return;
  throw new Error(
    `model ${JSON.stringify(spec)} was not launched with this worker (perm_model_not_launched): a worker loads only the built-in models (${Object.keys(builtins).join(', ')}) and the model modules given to it at launch (--model); it was not loaded`,
  );
}

const identities = new Map<string, string>();

/**
 * The identity of the model module `spec` (core/models/identity.ts), taken once per module as Node
 * caches the module itself: the code a worker runs does not change under it, and a module that
 * imports large files is hashed once, not once per agent.
 */
export function loadedModuleIdentity(spec: string): string {
  const path = modulePathOf(spec);
  let id = identities.get(path);
  if (id === undefined) identities.set(path, (id = moduleIdentity(path)));
  return id;
}

/**
 * An Initialize result's `modelIdentity`: the identity of the module this worker loaded, which the
 * coordinator holds against its own copy's (a worker on another host may have other files at the
 * same path); nothing for a built-in model.
 */
export function loadedIdentityField(m: { builtin: boolean; modelSpec: string }): { modelIdentity?: string } {
  return m.builtin ? {} : { modelIdentity: loadedModuleIdentity(m.modelSpec) };
}

/**
 * How a checkpoint payload names its model: a built-in by name, a module by its path-free identity
 * (never its path: a checkpoint's bytes do not depend on where the researcher's files live).
 */
export function payloadModel(m: { builtin: boolean; modelSpec: string }): string {
  return m.builtin ? m.modelSpec : loadedModuleIdentity(m.modelSpec);
}

/**
 * The model spec a fresh worker restores a payload's `model` with: for a module identity, the module
 * among those it was launched with that has it; a built-in's name (or an older checkpoint's path) as
 * it is — loading it refuses what the worker was not launched with.
 */
export function restoreSpecOf(model: string, launched: readonly string[]): string {
  const wanted = parseModuleIdentity(model);
  if (wanted === null) return model;
  const identityOf = (path: string): string | null => {
    try {
      return loadedModuleIdentity(path);
    } catch {
      return null; // a launched file gone: not this one
    }
  };
  const found = launched.find((path) => identityOf(path) === model);
  if (found !== undefined) return found;
  // The same file name with other content: the copy this worker holds, named as a profile mismatch is.
  const copies = launched.map(identityOf).filter((id) => id !== null && parseModuleIdentity(id)?.name === wanted.name);
  const loaded = copies.length > 0 ? `this worker loaded ${copies.join(', ')}: ` : '';
  throw new Error(
    `the checkpoint's model is ${model}; ${loaded}the checkpoint was taken with another copy of the model's files (or this worker was not launched with it)`,
  );
}

/**
 * A restore's identity mismatch as a refusal message: a model module's differing profile digest
 * names the copy this worker loaded (a worker on another host may hold other files at the path).
 */
export function mismatchMessage(who: string, mismatch: string, m: { builtin: boolean; modelSpec: string }): string {
  if (m.builtin || !mismatch.startsWith('profileDigest')) return `${who}: ${mismatch}`;
  return (
    `${who}: ${mismatch}; this worker loaded ${loadedModuleIdentity(m.modelSpec)}:` +
    ` the checkpoint was taken with another copy of the model's files (or other params)`
  );
}

async function importModel(
  spec: string,
  kind: 'agent' | 'environment',
  launched: readonly string[],
  builtins: Record<string, unknown>,
): Promise<unknown> {
  const path = modulePathOf(spec);
  requireLaunched(spec, path, launched, builtins);
  let mod: { default?: unknown; model?: unknown };
  try {
    mod = (await import(pathToFileURL(path).href)) as { default?: unknown; model?: unknown };
  } catch (e) {
    throw importFailure(path, e);
  }
  // A CommonJS module compiled by tsc holds its exports under `default` (module.exports.default).
  const cjs = mod.default as { default?: unknown; model?: unknown; __esModule?: boolean } | undefined;
  const model = cjs?.__esModule ? (cjs.default ?? cjs.model) : (mod.default ?? mod.model);
  if (!model || typeof model !== 'object' || (model as { kind?: unknown }).kind !== kind) {
    throw new Error(
      `model ${spec}: the module must export (default or \`model\`) an ${kind} model made with define${kind === 'agent' ? 'Agent' : 'Environment'}Model`,
    );
  }
  return model;
}

/** `launched`: the absolute model module paths this worker was launched with. */
export async function resolveAgentModel(
  spec: string,
  launched: readonly string[],
): Promise<ResolvedModel<AgentModel<unknown>>> {
  const builtin = BUILTIN_AGENT_MODELS[spec];
  if (builtin) return { model: builtin, builtin: true };
  if (!looksLikePath(spec))
    throw new Error(
      `model ${JSON.stringify(spec)}: not a built-in agent model (${Object.keys(BUILTIN_AGENT_MODELS).join(', ')}) nor a module path`,
    );
  return {
    model: (await importModel(spec, 'agent', launched, BUILTIN_AGENT_MODELS)) as AgentModel<unknown>,
    builtin: false,
  };
}

export async function resolveEnvironmentModel(
  spec: string,
  launched: readonly string[],
): Promise<ResolvedModel<EnvironmentModel<unknown>>> {
  const builtin = BUILTIN_ENVIRONMENT_MODELS[spec];
  if (builtin) return { model: builtin, builtin: true };
  if (!looksLikePath(spec))
    throw new Error(
      `model ${JSON.stringify(spec)}: not a built-in environment model (${Object.keys(BUILTIN_ENVIRONMENT_MODELS).join(', ')}) nor a module path`,
    );
  return {
    model: (await importModel(spec, 'environment', launched, BUILTIN_ENVIRONMENT_MODELS)) as EnvironmentModel<unknown>,
    builtin: false,
  };
}

/** `--model <path>` values: each an existing file, kept as an absolute path (relative to the working directory). */
export function readModelFlags(raw: unknown): string[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw) || !raw.every((m) => typeof m === 'string' && m !== ''))
    throw new DetsimError('struct_invalid_field', '--model takes a model module path', '--model');
  return [
    ...new Set(
      raw.map((spec: string) => {
        const path = modulePathOf(spec);
        let isFile = false;
        try {
          isFile = statSync(path).isFile();
        } catch {
          isFile = false;
        }
        if (!isFile)
          throw new DetsimError(
            'struct_unknown_model',
            `--model ${JSON.stringify(spec)}: no such model module file (${path})`,
            '--model',
          );
        return path;
      }),
    ),
  ].sort();
}
