// Where a run's user models come from, and how run.json names them (issue #27, docs/spec/model-identity.md):
// a TypeScript/JavaScript module by its path-free identity `module:<file>@sha256:<digest>` with its
// absolute path as the physical `modelPath`; a Python user model as `python:pkg.mod:Class@sha256:<the
// SHA-256 of its module's source>`, imported from the config file's directory (plan.modelDirs).
// A recorded run's modules are found again by name and digest: at the recorded path, else beside the
// run directory, its parent, or the current directory; a file there with another digest is refused as
// "model source changed". NOT model loading (the workers) and NOT the config schema (config.ts).
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { readLaunchFacts } from './launch-facts.js';
import { DetsimError } from '../../core/formats/errors.js';
import { findModule, moduleIdentity, parseModuleIdentity } from '../../core/models/identity.js';
import { isPythonUserModel } from '../config.js';
import type { RunJson } from '../session/run-json.js';

/** How run.json records a planned model: a module's identity (+ physical path), a Python model's spec@digest. */
export function recordedModel(
  model: string,
  digests: Record<string, string> | undefined,
): { model: string; modelPath?: string } {
  if (model.startsWith('/')) return { model: moduleIdentity(model), modelPath: model };
  const digest = digests?.[model];
  return { model: digest === undefined ? model : `${model}@sha256:${digest}` };
}

const PYTHON_IDENTITY = /^(python:[^@]+)@sha256:([0-9a-f]{64})$/;

/**
 * The directories a recorded run's models are looked for in, after their recorded places: beside
 * the run directory, its parent, the current directory, then where its Python models were imported
 * from when it ran (launch.json, physical: a run written with --out elsewhere still finds them).
 */
export function searchDirsFor(runDir: string): string[] {
  const dir = resolve(runDir);
  let recorded: string[] = [];
  try {
    recorded = (readLaunchFacts(dir)?.modelDirs ?? []).filter((d) => existsSync(d));
  } catch {
    // A damaged launch.json is refused where the launch is read (resume); here it only adds places.
  }
  return [...new Set([dirname(dir), dirname(dirname(dir)), process.cwd(), ...recorded])];
}

/**
 * run.json with each module identity replaced by the absolute path of the file that has it (found
 * as findModule says) and each Python identity by its spec, ready for resolveConfig; refused naming
 * the field when a module is not found or found changed. Also the directories Python models are
 * imported from, and the Python digests recorded (the plan-time probe checks them).
 */
export function locateRecordedModels(
  r: RunJson,
  dirs: readonly string[],
): { record: RunJson; modelDirs: string[]; pythonDigests: Record<string, string> } {
  const pythonDigests: Record<string, string> = {};
  const locate = <T extends { model: string; modelPath?: string }>(p: T, field: string): T => {
    const python = PYTHON_IDENTITY.exec(p.model);
    if (python) {
      pythonDigests[python[1]!] = python[2]!;
      return { ...p, model: python[1]! };
    }
    if (parseModuleIdentity(p.model) === null) return p;
    const found = findModule(p.model, p.modelPath, dirs);
    if (found.path !== null) return { ...p, model: found.path };
    const changed = found.changed[0];
    if (changed)
      throw new DetsimError(
        'ident_model_source_changed',
        `${field}: model source changed: ${p.model} is recorded, and ${changed.path}${importsOf(changed.files)} has sha256 ${changed.digest}${missingOf(changed.missing)}`,
        field,
      );
    throw new DetsimError(
      'struct_unknown_model',
      `${field}: ${p.model} not found (looked at ${found.looked.join(', ')}); put the model file beside the run directory or its parent`,
      field,
    );
  };
  const record: RunJson = {
    ...r,
    environment: locate(r.environment, 'environment.model'),
    agents: r.agents.map((a, i) => locate(a, `agents[${i}].model`)),
  };
  return { record, modelDirs: [...dirs], pythonDigests };
}

/** Whether a recorded run has a Python user model (its plan then needs modelDirs). */
export function hasPythonUserModels(r: RunJson): boolean {
  return [r.environment.model, ...r.agents.map((a) => a.model)].some(isPythonUserModel);
}

/** " with the N files it imports" for a module that imports files of its own (they are in its digest). */
function importsOf(files: number): string {
  return files > 1 ? ` with the ${files - 1} file${files === 2 ? '' : 's'} it imports` : '';
}

/** "; it imports ./policy.js, which is not there" for the relative imports a found module names that are missing. */
function missingOf(missing: readonly string[]): string {
  if (missing.length === 0) return '';
  const named = missing.join(', ');
  return `; it imports ${named}, which ${missing.length === 1 ? 'is' : 'are'} not there (copy the files it imports beside it, laid out as they were)`;
}
