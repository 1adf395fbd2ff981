// `detsim bisect`, the receipt side: reads two run directories' receipts (run.json, the trace
// through its one reader with the receipt's binding checked, summary.json), refuses two runs that
// are not of one config (naming the first composition field that differs), and names the first
// divergence of their traces (diagnosis.ts). Two code versions of one config — the same user model
// file name with other content — are accepted and listed: the model identity (`module:<name>@sha256:…`),
// its modelVersion and the profile digest derived from it are then compared as equal, everywhere
// else the runs must agree. NOT the checkpoint states (bisect-states.ts) and runs nothing.
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { hashView, runReceiptView, type ReceiptView } from '../receipt/receipt-view.js';
import { diagnose, diagnoseViews, type Divergence } from './diagnosis.js';

type Obj = Record<string, JsonValue>;
/** A receipt's head as bisect reads it (run.json and summary.json parsed). */
type Head = { run: JsonValue; summary: JsonValue } & Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** One run directory as bisect reads it: its receipt (epochs rebased, steps read a pass at a time), ReproHash and step count. */
export interface BisectSide {
  readonly runDir: string;
  readonly receipt: ReceiptView;
  readonly reproHash: string;
  readonly steps: number;
}

/** A participant whose user model has the same file name and other content in the two runs. */
export interface CodeVersion {
  readonly participantId: string;
  readonly kind: 'agent' | 'environment';
  readonly left: string;
  readonly right: string;
}

/** Read a run directory; a missing or damaged run.json, trace or receipt is refused naming it. */
export function readSide(runDir: string): BisectSide {
  const receipt = runReceiptView(runDir);
  const h = hashView(receipt);
  return { runDir, receipt, reproHash: h.reproHash, steps: h.steps };
}

/** `module:x.mjs` of `module:x.mjs@sha256:…` (a user model's name), or null for a built-in model. */
function sourceName(model: JsonValue | undefined): string | null {
  if (typeof model !== 'string') return null;
  const at = model.indexOf('@sha256:');
  return at < 0 ? null : model.slice(0, at);
}

function codeVersionOf(a: Obj, b: Obj, participantId: string, kind: CodeVersion['kind']): CodeVersion | null {
  const name = sourceName(a.model);
  if (name === null || name !== sourceName(b.model) || a.model === b.model) return null;
  return { participantId, kind, left: a.model as string, right: b.model as string };
}

/** The participants whose user model is another version (same file name, other content) in the two runs. */
export function codeVersions(left: Head, right: Head): CodeVersion[] {
  const found: CodeVersion[] = [];
  const [ra, rb] = [left.run, right.run];
  if (!isObj(ra) || !isObj(rb)) return found;
  if (isObj(ra.environment) && isObj(rb.environment)) {
    const id = typeof ra.environment.environmentId === 'string' ? ra.environment.environmentId : 'environment';
    const v = codeVersionOf(ra.environment, rb.environment, id, 'environment');
    if (v) found.push(v);
  }
  const agentsB = new Map<string, Obj>();
  for (const x of Array.isArray(rb.agents) ? rb.agents : [])
    if (isObj(x) && typeof x.agentId === 'string') agentsB.set(x.agentId, x);
  for (const x of Array.isArray(ra.agents) ? ra.agents : []) {
    if (!isObj(x) || typeof x.agentId !== 'string') continue;
    const other = agentsB.get(x.agentId);
    const v = other ? codeVersionOf(x, other, x.agentId, 'agent') : null;
    if (v) found.push(v);
  }
  return found;
}

/** The identity fields a model version carries, taken from `from` onto `onto`. */
const IDENTITY_FIELDS = ['model', 'modelVersion', 'profileDigest'] as const;
function withIdentityOf(onto: Obj, from: Obj): Obj {
  const out: Obj = { ...onto };
  for (const k of IDENTITY_FIELDS) if (k in from) out[k] = from[k]!;
  return out;
}

/** The right run.json with each code version's identity fields taken from the left one. */
function maskedRun(left: Obj, right: Obj, versions: readonly CodeVersion[]): Obj {
  const agents = new Set(versions.filter((v) => v.kind === 'agent').map((v) => v.participantId));
  const leftAgents = new Map<string, Obj>();
  for (const x of Array.isArray(left.agents) ? left.agents : [])
    if (isObj(x) && typeof x.agentId === 'string') leftAgents.set(x.agentId, x);
  const out: Obj = { ...right };
  if (Array.isArray(right.agents))
    out.agents = right.agents.map((x) =>
      isObj(x) && typeof x.agentId === 'string' && agents.has(x.agentId) && leftAgents.has(x.agentId)
        ? withIdentityOf(x, leftAgents.get(x.agentId)!)
        : x,
    );
  if (versions.some((v) => v.kind === 'environment') && isObj(right.environment) && isObj(left.environment))
    out.environment = withIdentityOf(right.environment, left.environment);
  return out;
}

/** A step whose agent profile digests that are the right model version's own become the left one's. */
function maskedStep(s: unknown, profiles: Map<string, [string, string]>): unknown {
  const b = isObj(s) ? s.behaviour : undefined;
  if (!isObj(s) || !isObj(b) || !Array.isArray(b.agents)) return s;
  const agents = b.agents.map((x) => {
    const p = isObj(x) && typeof x.agentId === 'string' ? profiles.get(x.agentId) : undefined;
    return p && isObj(x) && x.profileDigest === p[1] ? { ...x, profileDigest: p[0] } : x;
  });
  return { ...s, behaviour: { ...b, agents } };
}

function* mapSteps(steps: Iterable<unknown>, f: (s: unknown) => unknown): Generator<unknown> {
  for (const s of steps) yield f(s);
}

function profileDigests(run: JsonValue): Map<string, string> {
  const m = new Map<string, string>();
  for (const x of isObj(run) && Array.isArray(run.agents) ? run.agents : [])
    if (isObj(x) && typeof x.agentId === 'string' && typeof x.profileDigest === 'string')
      m.set(x.agentId, x.profileDigest);
  return m;
}

/**
 * The right receipt as the left code version would have recorded it: model identities, model
 * versions and profile digests of the code versions taken from the left; the behaviour digest too
 * (it covers the profile digests, and the steps it digests are compared field by field first).
 */
export function maskCodeVersions(left: ReceiptView, right: ReceiptView, versions: readonly CodeVersion[]): ReceiptView {
  const [l, r] = [left.head as Head, right.head as Head];
  if (versions.length === 0 || !isObj(l.run) || !isObj(r.run)) return right;
  const [pa, pb] = [profileDigests(l.run), profileDigests(r.run)];
  const profiles = new Map<string, [string, string]>();
  for (const v of versions)
    if (v.kind === 'agent' && pa.has(v.participantId) && pb.has(v.participantId))
      profiles.set(v.participantId, [pa.get(v.participantId)!, pb.get(v.participantId)!]);
  const summary =
    isObj(r.summary) && isObj(l.summary) && 'behaviourDigest' in l.summary
      ? { ...r.summary, behaviourDigest: l.summary.behaviourDigest! }
      : r.summary;
  return {
    head: { ...r, run: maskedRun(l.run, r.run, versions), summary },
    steps: () => mapSteps(right.steps(), (s) => maskedStep(s, profiles)),
  };
}

/**
 * The first divergence of two runs of one config (null: none), their code versions listed. Two
 * runs whose compositions differ otherwise are refused (`ident_bisect_config_differs`), naming the field.
 */
export function traceDivergence(
  left: BisectSide,
  right: BisectSide,
): { versions: CodeVersion[]; divergence: Divergence | null } {
  const versions = codeVersions(left.receipt.head as Head, right.receipt.head as Head);
  const masked = maskCodeVersions(left.receipt, right.receipt, versions);
  const divergence = diagnoseViews(left.receipt, masked);
  if (divergence?.part === 'composition') refuseConfigs(left, right, rootOf(left.receipt, masked) ?? divergence);
  return { versions, divergence };
}

/** run.json's top-level scalars (masterSeed, steps, …): a difference there explains the derived ones (each agent's seed). */
function rootOf(left: ReceiptView, right: ReceiptView): Divergence | null {
  const scalars = (run: JsonValue): Obj =>
    Object.fromEntries(Object.entries(isObj(run) ? run : {}).filter(([, v]) => v === null || typeof v !== 'object'));
  const [l, r] = [left.head as Head, right.head as Head];
  const d = diagnose({ ...l, run: scalars(l.run), steps: [] }, { ...r, run: scalars(r.run), steps: [] });
  return d?.part === 'composition' ? d : null;
}

function refuseConfigs(left: BisectSide, right: BisectSide, divergence: Divergence): never {
  const show = (v: JsonValue | '(absent)') => (v === '(absent)' ? v : JSON.stringify(v));
  throw new DetsimError(
    'ident_bisect_config_differs',
    `${divergence.path}: ${show(divergence.left)} (${left.runDir}) vs ${show(divergence.right)} (${right.runDir}): not runs of one config (bisect lets only a user model's content differ)`,
    divergence.path,
  );
}
