// launch.json: the physical launch facts of one run — how its workers were started (launcher kind
// and srun flags), where they came from (placement: local, or a rendezvous directory) and whether
// they served TLS (and where the set is, and whether it is the run's own per-run set), and whether the
// environment ran inline in the coordinator's thread (`environment.transport: inline`) — written into
// the run directory before any worker starts, so `detsim resume` relaunches the run the same way
// instead of starting local plaintext workers. A file of its own beside run.json: the receipt binds
// run.json, trace and summary only, so nothing here can reach a ReproHash or a golden.
// Also the per-run TLS set (`<run dir>/tls/`, made with certs.ts when the plan asks for one).
// NOT run.json (run-json.ts), NOT how workers are started (launcher.ts, slurm/).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { makeCertSet } from './certs.js';
import { LAUNCHERS, type LauncherKind, type RunPlan } from '../config.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { TLS_FILES } from '../../core/formats/tls-dir.js';
import { writeJsonDurable } from '../session/run-dir.js';
import { environmentInline } from './inline-worker.js';
import { checkWorkerTls, setExpiresWithin } from './tls.js';

export const LAUNCH_FILE = 'launch.json';
export const LAUNCH_FORMAT = 'detsim-launch-v1';
/** Where a per-run TLS set lives inside the run directory (0700; keys 0600). */
export const PER_RUN_TLS_DIR = 'tls';

const LAUNCH_JSON_SCHEMA = z.strictObject({
  format: z.literal(LAUNCH_FORMAT),
  launcher: z.strictObject({ kind: z.enum(LAUNCHERS), srunArgs: z.array(z.string()) }),
  placement: z.union([
    z.strictObject({ kind: z.literal('local') }),
    z.strictObject({
      kind: z.literal('rendezvous'),
      dir: z.string().min(1),
      timeoutMs: z.number().positive(),
      tokenFile: z.string().min(1).optional(),
    }),
  ]),
  tls: z.union([z.null(), z.strictObject({ dir: z.string().min(1), perRun: z.boolean() })]),
  /** `inline`: the environment ran in the coordinator's thread (absent: on the workers' transport). */
  environmentTransport: z.literal('inline').optional(),
  /** Where the run's Python models were imported from (the config's directory): looked in last on resume. */
  modelDirs: z.array(z.string().min(1)).optional(),
});

export type LaunchFacts = z.output<typeof LAUNCH_JSON_SCHEMA>;

/** The launch facts of a plan whose TLS set (if any) is already made. */
export function launchFactsOf(plan: RunPlan, perRun: boolean): LaunchFacts {
  const launcher = plan.launcher?.kind === 'slurm' ? plan.launcher : { kind: 'local' as const, srunArgs: [] };
  return {
    format: LAUNCH_FORMAT,
    launcher: { kind: launcher.kind, srunArgs: launcher.srunArgs },
    placement: plan.rendezvous ? { kind: 'rendezvous', ...plan.rendezvous } : { kind: 'local' },
    tls: plan.tls ? { dir: plan.tls.dir, perRun } : null,
    ...(environmentInline(plan) ? { environmentTransport: 'inline' as const } : {}),
    ...(plan.modelDirs && plan.modelDirs.length > 0 ? { modelDirs: [...plan.modelDirs] } : {}),
  };
}

/**
 * Before a fresh run's workers start, in its just-allocated run directory: make the per-run TLS set
 * when the plan asks for one (into `<run dir>/tls`), check the TLS plan, and record launch.json.
 * Returns the plan with its `tls` set. A refusal removes what it made (the run directory is empty).
 */
export function prepareLaunch(plan: RunPlan, runDir: string): RunPlan {
  try {
    const launched = withPerRunTls(plan, runDir);
    checkWorkerTls(launched);
    writeJsonDurable(runDir, LAUNCH_FILE, launchFactsOf(launched, plan.perRunTls === true));
    return launched;
  } catch (e) {
    rmSync(runDir, { recursive: true, force: true });
    throw e;
  }
}

/** A per-run set that expires sooner than this is made anew on resume (a run may last hours). */
export const PER_RUN_TLS_RENEW_MS = 60 * 60 * 1000;

/**
 * `plan` with its per-run set made in `<run dir>/tls`, kept when the set is there already (a
 * resume) unless it has expired or expires within PER_RUN_TLS_RENEW_MS: then it is made anew the
 * way the run made it. Nothing else holds it: the workers are relaunched with the new set.
 */
function withPerRunTls(plan: RunPlan, runDir: string): RunPlan {
  const dir = join(runDir, PER_RUN_TLS_DIR);
  if (!plan.perRunTls) return plan;
  if (existsSync(join(dir, TLS_FILES.ca)) && setExpiresWithin(dir, PER_RUN_TLS_RENEW_MS))
    rmSync(dir, { recursive: true, force: true });
  if (!existsSync(join(dir, TLS_FILES.ca))) makeCertSet(dir);
  const { perRunTls: _made, ...rest } = plan;
  return { ...rest, tls: { dir } };
}

/** A run directory's launch.json, or undefined when it has none (a run from before launch facts were recorded). */
export function readLaunchFacts(runDir: string): LaunchFacts | undefined {
  const path = join(runDir, LAUNCH_FILE);
  if (!existsSync(path)) return undefined;
  let parsed: ReturnType<typeof LAUNCH_JSON_SCHEMA.safeParse>;
  try {
    parsed = LAUNCH_JSON_SCHEMA.safeParse(parseStrict(readFileSync(path)));
  } catch (e) {
    throw new DetsimError('struct_run_record', `${path}: not strict JSON (${(e as Error).message})`, LAUNCH_FILE);
  }
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(top level)';
    throw new DetsimError('struct_run_record', `${path}: ${field}: ${issue.message}`, field);
  }
  return parsed.data;
}

/**
 * The plan a resume launches with: the plan run.json rebuilds, with the recorded launcher,
 * placement, TLS (a per-run set missing from the run directory, or expiring, is made again there)
 * and inline environment. `launcher` overrides the recorded kind: `local` starts the workers here
 * (dropping a rendezvous placement that was Slurm's), keeping TLS. Without launch.json the plan is unchanged.
 */
export function relaunchPlan(
  plan: RunPlan,
  facts: LaunchFacts | undefined,
  runDir: string,
  launcher?: LauncherKind,
): RunPlan {
  if (!facts) return launcher === 'slurm' ? { ...plan, launcher: { kind: 'slurm', srunArgs: [] } } : plan;
  const kind = launcher ?? facts.launcher.kind;
  const out: RunPlan = { ...plan };
  // What launch.json records, so a run whose environment ran on the workers stays there whatever the default.
  out.environmentTransport = facts.environmentTransport ?? 'workers';
  if (kind === 'slurm') out.launcher = { kind, srunArgs: facts.launcher.srunArgs };
  const rendezvousWasSlurms = facts.launcher.kind === 'slurm';
  if (facts.placement.kind === 'rendezvous' && (kind === 'slurm' || !rendezvousWasSlurms))
    out.rendezvous = {
      dir: facts.placement.dir,
      timeoutMs: facts.placement.timeoutMs,
      ...(facts.placement.tokenFile !== undefined ? { tokenFile: facts.placement.tokenFile } : {}),
    };
  // A per-run set is the run directory's own, wherever the directory has moved since.
  if (facts.tls?.perRun) return withPerRunTls({ ...out, perRunTls: true }, runDir);
  if (facts.tls) out.tls = { dir: facts.tls.dir };
  return out;
}
