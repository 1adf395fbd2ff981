// The Python worker runtime as the coordinator finds and checks it: which interpreter runs Python
// workers ($DETSIM_PYTHON, else detsim's own venv workers/python/.venv when it exists, else python3),
// and the one plan-time probe (a single interpreter spawn, before any run directory is made) that
// refuses a missing interpreter or package and a Python user model whose module cannot be found, and
// returns each user model module's source digest (model-source.ts records it; a recorded run's digest
// that no longer matches is refused as "model source changed"). NOT the launch of workers (launcher.ts).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { isPythonUserModel, type RunPlan } from '../config.js';
import { PACKAGE_ROOT } from './package-root.js';

export { PACKAGE_ROOT };
/** The venv `bash scripts/test-python.sh` makes (also found by the tests). */
export const OWN_VENV_PYTHON = join(PACKAGE_ROOT, 'workers', 'python', '.venv', 'bin', 'python');

/** The interpreter that runs Python workers, and why that one. */
export function pythonChoice(): { python: string; why: string } {
  if (process.env.DETSIM_PYTHON) return { python: process.env.DETSIM_PYTHON, why: '$DETSIM_PYTHON' };
  if (existsSync(OWN_VENV_PYTHON))
    return { python: OWN_VENV_PYTHON, why: "detsim's venv (bash scripts/test-python.sh)" };
  return { python: 'python3', why: 'python3 on PATH (no $DETSIM_PYTHON, no detsim venv)' };
}

/** The interpreter that runs Python workers: $DETSIM_PYTHON, else detsim's venv if it exists, else python3. */
export function pythonInterpreter(): string {
  return pythonChoice().python;
}

/** The command that installs the detsim_worker package into `python`. */
export function pythonWorkerInstallCommand(python = pythonInterpreter()): string {
  return `${python} -m pip install ${join(PACKAGE_ROOT, 'workers', 'python')}`;
}

/** The command that makes detsim's own venv (a checkout has the script; an installed package may not). */
export function makeVenvCommand(): string | null {
  const script = join(PACKAGE_ROOT, 'scripts', 'test-python.sh');
  return existsSync(script) ? `bash ${script}` : null;
}

const venvHint = (): string => {
  const make = makeVenvCommand();
  return make === null ? '' : ` (or make detsim's venv, used without DETSIM_PYTHON: ${make})`;
};

// Run by the interpreter: argv[1] = JSON {dirs, models, checks}; prints {"digests", "missing", "refused"}.
// checks: [{model, params, field}]: the model's resolve_params on its params (imports the module).
// A model's digest (docs/spec/model-identity.md) is detsim_worker.model_source's, which the Python
// worker reports too (its Initialize result's modelIdentity).
const PROBE = `
import importlib, json, os, sys, sysconfig, traceback
arg = json.loads(sys.argv[1])
sys.path[:0] = arg['dirs']
import detsim_worker
import detsim_worker.socket_wire  # the wire detsim run speaks to the workers it starts (older packages lack it)
from detsim_worker.model_source import source_digest
digests, missing, refused, unfound = {}, [], [], {}
for spec in arg['models']:
    digest, unfound[spec] = source_digest(spec)
    if digest is None:
        missing.append(spec)
    else:
        digests[spec] = digest
def shown(path):
    for d in arg['dirs']:
        if path.startswith(os.path.join(d, '')):
            return os.path.relpath(path, d)
    return path
def installed(path):
    return any(path.startswith(os.path.join(p, '')) for p in {sysconfig.get_path(k) for k in ('stdlib', 'purelib', 'platlib')})
def located(e):
    # Where an import failed: the file and line of the researcher's own code, as the TypeScript worker says it.
    if isinstance(e, SyntaxError) and e.filename:
        return f'{shown(e.filename)}:{e.lineno}: {type(e).__name__}: {e.msg}'
    own = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith('<') and not installed(f.filename)]
    return (f'{shown(own[-1].filename)}:{own[-1].lineno}: ' if own else '') + f'{type(e).__name__}: {e}'
for check in arg['checks']:
    if check['model'] in missing:
        continue
    module, _, name = check['model'][len('python:'):].partition(':')
    try:
        target = importlib.import_module(module)
    except Exception as e:
        refused.append({'field': check['field'], 'param': 'model', 'message': f'model: {located(e)}', 'unknown': False})
        continue
    try:
        for part in name.split('.'):
            target = getattr(target, part)
    except AttributeError:
        where = shown(getattr(sys.modules.get(module), '__file__', None) or module)
        refused.append({'field': check['field'], 'param': 'model', 'unknown': False,
                        'message': f'model: {check["model"]}: {where} has no {name!r}'})
        continue
    try:
        (target() if isinstance(target, type) else target).resolve_params(dict(check['params']))
    except Exception as e:
        refused.append({'field': check['field'], 'param': getattr(e, 'param', None), 'message': str(e),
                        'unknown': bool(getattr(e, 'unknown', False))})
print(json.dumps({'digests': digests, 'missing': missing, 'refused': refused,
                  'unfound': {spec: unfound[spec] for spec in digests}}))
`;

/**
 * Refuse a plan that puts workers on Python when the interpreter, the detsim_worker package or a user
 * model's module is missing, before anything starts (the message names the field and the fix); a
 * recorded digest (plan.modelDigests from run.json) that the module no longer has is refused as
 * "model source changed". Sets plan.modelDigests to the digests found.
 */
export function checkPythonWorker(plan: RunPlan): void {
  const onPython = plan.workers.filter((w) => w.runtime === 'python');
  if (onPython.length === 0) return;
  const field = onPython.some((w) => w.role === 'agent') ? 'workers.runtime' : 'environment.runtime';
  const models = [plan.environment.model, ...plan.agents.map((a) => a.model)].filter(isPythonUserModel);
  const found = probePython({ dirs: plan.modelDirs ?? [], models, checks: paramChecks(plan) }, field);
  refuseMissing(plan, found.missing);
  // A changed source first: a module of its own left behind also fails the params check's import.
  refuseChanged(plan, found.digests, found.unfound);
  refuseParams(found.refused);
  if (Object.keys(found.digests).length) plan.modelDigests = found.digests;
}

/**
 * The source digests of Python user models (`python:…` specs) imported from `dirs`, as run.json
 * records them, in one probe; a model that cannot be found has none (checkPythonWorker refuses it).
 */
export function pythonModelDigests(models: readonly string[], dirs: readonly string[]): Record<string, string> {
  return probePython({ dirs, models, checks: [] }, 'workers.runtime').digests;
}

/** What the probe found: each model's digest, the models it could not find, the params it refused. */
interface ProbeFound {
  digests: Record<string, string>;
  missing: string[];
  refused: Refused[];
  unfound: Record<string, string[]>;
}

/** Run PROBE in the interpreter the Python workers use; a missing interpreter or package refused naming `field`. */
function probePython(
  arg: { dirs: readonly string[]; models: readonly string[]; checks: unknown[] },
  field: string,
): ProbeFound {
  const { python, why } = pythonChoice();
  const text = JSON.stringify({ ...arg, models: [...new Set(arg.models)].sort() });
  const probe = spawnSync(python, ['-c', PROBE, text], { encoding: 'utf8', timeout: 60_000 });
  if (probe.error)
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: python needs a Python interpreter (>= 3.10), and ${JSON.stringify(python)} (${why}) cannot be run; set DETSIM_PYTHON to one${venvHint()}`,
      field,
    );
  if (probe.status !== 0) {
    // Python's own last line (e.g. an installed detsim_worker older than this checkout's) says which import failed.
    const said = probe.stderr.trim().split('\n').at(-1) ?? '';
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: python needs the detsim_worker package, which ${JSON.stringify(python)} (${why}) cannot import${said ? ` (${said})` : ''}; install it with: ${pythonWorkerInstallCommand(python)}${venvHint()}`,
      field,
    );
  }
  return JSON.parse(probe.stdout) as ProbeFound;
}

// Run by the interpreter for a fork: argv[1] = JSON {dirs, checks: [{model, field, before, after}]};
// prints per check {field, before, after, forkParams} (params resolved by the model, strict split
// off as detsim_worker.params does) or {field, refused: {param, message}}.
const FORK_PROBE = `
import importlib, json, sys
arg = json.loads(sys.argv[1])
sys.path[:0] = arg['dirs']
from detsim_worker.params import resolve_model_params
out = []
for check in arg['checks']:
    module, _, name = check['model'][len('python:'):].partition(':')
    try:
        target = importlib.import_module(module)
        for part in name.split('.'):
            target = getattr(target, part)
        model = target() if isinstance(target, type) else target
        before, bs = resolve_model_params(model, dict(check['before']))
        after, af = resolve_model_params(model, dict(check['after']))
        out.append({'field': check['field'], 'before': {'params': before, **({} if bs is None else {'strict': bs})},
                    'after': {'params': after, **({} if af is None else {'strict': af})},
                    'forkParams': list(getattr(model, 'fork_params', ()) or ())})
    except Exception as e:
        out.append({'field': check['field'], 'refused': {'param': getattr(e, 'param', None) or 'params', 'message': str(e)}})
print(json.dumps(out))
`;

/** A participant of a fork whose model is a Python user model (`python:…`): its params before and after. */
export interface PythonForkCheck {
  model: string;
  field: string;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
}

/**
 * For `detsim fork --set …params…` of Python user models: each model imported in one interpreter
 * (from `dirs`, as its workers import it), its params resolved before and after, and its
 * fork_params — the same answers moduleForkParams (module-probe.ts) gives for TypeScript modules.
 */
export function pythonForkParams(checks: readonly PythonForkCheck[], dirs: readonly string[]): unknown[] {
  if (checks.length === 0) return [];
  const { python, why } = pythonChoice();
  const r = spawnSync(python, ['-c', FORK_PROBE, JSON.stringify({ dirs, checks })], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error || r.status !== 0)
    throw new DetsimError(
      'struct_invalid_field',
      `model params could not be checked with ${JSON.stringify(python)} (${why}): ${(r.stderr || String(r.error)).trim().split('\n').pop()}`,
    );
  return JSON.parse(r.stdout) as unknown[];
}

/** A model's refusal of its params, as a probe reports it (Python's ParamError or TypeScript's). */
export interface Refused {
  field: string;
  param: string | null;
  message: string;
  unknown: boolean;
}

/** The first refused param as the plan-time refusal: the field and param named, no run directory made. */
export function refuseParams(refused: readonly Refused[]): void {
  const r = refused[0];
  if (r === undefined) return;
  throw new DetsimError(
    r.param === null ? 'struct_invalid_field' : r.unknown ? 'struct_unknown_field' : 'struct_invalid_field',
    r.param === null ? `${r.field}.params: ${r.message}` : `${r.field}.${r.message}`,
    r.param === null ? `${r.field}.params` : `${r.field}.${r.param}`,
  );
}

/** The params each participant with a Python user model gets (strict split off): the probe checks them. */
function paramChecks(plan: RunPlan): { model: string; params: Record<string, unknown>; field: string }[] {
  const all = [
    { model: plan.environment.model, params: plan.environment.params, field: 'environment' },
    ...plan.agents.map((a, i) => ({ model: a.model, params: a.params, field: `agents[${i}]` })),
  ];
  return all
    .filter((c) => isPythonUserModel(c.model))
    .map(({ model, params, field }) => {
      const { strict: _strict, ...rest } = params;
      return { model, params: rest, field };
    });
}

function fieldOf(plan: RunPlan, model: string): string {
  if (plan.environment.model === model) return 'environment.model';
  return `agents[${plan.agents.findIndex((a) => a.model === model)}].model`;
}

function refuseMissing(plan: RunPlan, missing: readonly string[]): void {
  const model = missing[0];
  if (model === undefined) return;
  const module = model.slice('python:'.length).split(':')[0]!;
  const where = (plan.modelDirs ?? []).join(', ') || "the interpreter's path";
  throw new DetsimError(
    'struct_unknown_model',
    `${fieldOf(plan, model)}: ${model}: module ${module} is not importable (looked in ${where} and the interpreter's path)`,
    fieldOf(plan, model),
  );
}

function refuseChanged(plan: RunPlan, now: Record<string, string>, unfound: Record<string, string[]>): void {
  for (const [model, recorded] of Object.entries(plan.modelDigests ?? {})) {
    if (now[model] === undefined || now[model] === recorded) continue;
    const lost = unfound[model] ?? [];
    const why = lost.length
      ? `; it imports ${lost.join(', ')}, which Python cannot find here (a module of your own not copied along?)`
      : '';
    throw new DetsimError(
      'ident_model_source_changed',
      `${fieldOf(plan, model)}: model source changed: ${model} was sha256 ${recorded}, its module is now sha256 ${now[model]}${why}`,
      fieldOf(plan, model),
    );
  }
}
