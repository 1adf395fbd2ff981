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
// A model's digest (docs/spec/model-identity.md): its module's source, then "\n<path>=sha256:<digest>"
// for each file of the researcher's own it imports (found under the directory the module's top-level
// package is in, not in an installed environment), sorted by path, then "\n<dist>==<version>".
const PROBE = `
import ast, hashlib, importlib, importlib.metadata, importlib.util, json, os, sys
arg = json.loads(sys.argv[1])
sys.path[:0] = arg['dirs']
import detsim_worker
digests, missing, refused, unfound = {}, [], [], {}
INSTALLED = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
DISTRIBUTED = importlib.metadata.packages_distributions()
def own(path, root, name, top):
    # Another package installed as a distribution (an editable install too) is not the model's own.
    if name.split('.')[0] != top and name.split('.')[0] in DISTRIBUTED:
        return False
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    return (os.path.commonpath([path, root]) == root and 'site-packages' not in parts and 'dist-packages' not in parts
            and not any(os.path.commonpath([path, p]) == p for p in INSTALLED))
def imported(name, origin):
    try:
        with open(origin, 'rb') as f:
            tree = ast.parse(f.read())
    except Exception:
        return
    package = name if os.path.basename(origin) == '__init__.py' else name.rpartition('.')[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, True) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name('.' * node.level + (node.module or ''), package)
            except Exception:
                continue
            yield base, True
            yield from ((base + '.' + a.name, False) for a in node.names if a.name != '*')
def own_files(module, origin):
    depth = module.count('.') + (os.path.basename(origin) == '__init__.py')
    root = os.path.realpath(origin)
    for _ in range(depth + 1):
        root = os.path.dirname(root)
    seen, pending = {os.path.realpath(origin)}, [(module, origin)]
    while pending:
        name, path = pending.pop()
        names = dict(imported(name, path))
        names[name] = True
        wanted = {}
        for n, required in names.items():
            for i in range(1, n.count('.') + 2):
                part = '.'.join(n.split('.')[:i])
                wanted[part] = wanted.get(part, False) or required or part != n
        for n in sorted(wanted):
            try:
                s = importlib.util.find_spec(n)
            except Exception:
                s = None
            if s is None and wanted[n]:
                unfound.setdefault(module, set()).add(n)
            if s is None or not s.origin or not os.path.isfile(s.origin) or not own(s.origin, root, n, module.split('.')[0]):
                continue
            real = os.path.realpath(s.origin)
            if real not in seen:
                seen.add(real)
                pending.append((n, s.origin))
    seen.discard(os.path.realpath(origin))
    return sorted((os.path.relpath(p, root).replace(os.sep, '/'), p) for p in seen)
for spec in arg['models']:
    module = spec[len('python:'):].partition(':')[0]
    try:
        found = importlib.util.find_spec(module)
    except Exception:
        found = None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        missing.append(spec)
        continue
    with open(found.origin, 'rb') as f:
        h = hashlib.sha256(f.read())
    for rel, path in own_files(module, found.origin):
        with open(path, 'rb') as f:
            h.update(f'\\n{rel}=sha256:{hashlib.sha256(f.read()).hexdigest()}'.encode())
    top = module.split('.')[0]
    for dist in sorted(DISTRIBUTED.get(top, [])):
        h.update(f'\\n{dist}=={importlib.metadata.version(dist)}'.encode())
    digests[spec] = h.hexdigest()
for check in arg['checks']:
    if check['model'] in missing:
        continue
    module, _, name = check['model'][len('python:'):].partition(':')
    try:
        target = importlib.import_module(module)
        for part in name.split('.'):
            target = getattr(target, part)
        (target() if isinstance(target, type) else target).resolve_params(dict(check['params']))
    except Exception as e:
        refused.append({'field': check['field'], 'param': getattr(e, 'param', None), 'message': str(e),
                        'unknown': bool(getattr(e, 'unknown', False))})
print(json.dumps({'digests': digests, 'missing': missing, 'refused': refused,
                  'unfound': {spec: sorted(unfound.get(spec[len('python:'):].partition(':')[0], ())) for spec in digests}}))
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
  const { python, why } = pythonChoice();
  const models = [plan.environment.model, ...plan.agents.map((a) => a.model)].filter(isPythonUserModel);
  const arg = JSON.stringify({
    dirs: plan.modelDirs ?? [],
    models: [...new Set(models)].sort(),
    checks: paramChecks(plan),
  });
  const probe = spawnSync(python, ['-c', PROBE, arg], { encoding: 'utf8', timeout: 60_000 });
  if (probe.error)
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: python needs a Python interpreter (>= 3.10), and ${JSON.stringify(python)} (${why}) cannot be run; set DETSIM_PYTHON to one${venvHint()}`,
      field,
    );
  if (probe.status !== 0)
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: python needs the detsim_worker package, which ${JSON.stringify(python)} (${why}) cannot import; install it with: ${pythonWorkerInstallCommand(python)}${venvHint()}`,
      field,
    );
  const found = JSON.parse(probe.stdout) as {
    digests: Record<string, string>;
    missing: string[];
    refused: Refused[];
    unfound: Record<string, string[]>;
  };
  refuseMissing(plan, found.missing);
  // A changed source first: a module of its own left behind also fails the params check's import.
  refuseChanged(plan, found.digests, found.unfound);
  refuseParams(found.refused);
  if (Object.keys(found.digests).length) plan.modelDigests = found.digests;
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
