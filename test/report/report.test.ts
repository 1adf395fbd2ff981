// `detsim report` on real run directories, opened in a real headless Chromium (puppeteer-core
// driving the system's chromium): a plain run, a resumed copy, a run that recovered from a worker
// SIGKILLed mid-run, a run verified by `detsim verify` and a sweep directory (three runs of two
// configs with a hand-written sweep.json). Each page must load with no console error and no request
// beyond its own file, and every chart must hold the numbers of the trace and ledger as this test
// reads them itself (gunzip + JSON.parse, not the library's reader). Then the refusals: a tampered
// trace segment (exit 1, the file named, nothing written), an existing --out, a foreign
// report.html, a bad sweep.json, a path that is no run. Chromium missing: the browser cases skip
// saying so, and CI fails on that skip (scripts/test-summary.mjs; .ci/run installs chromium).
// DETSIM_REPORT_SHOT=<file.png> also copies the recovered run's screenshot there; DETSIM_REPORT_KEEP=1 keeps
// the temp directory (runs, pages, screenshots) instead of removing it.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAtSteps } from '../../bench/recover-kill-loop.js';
import { loadConfig } from '../../coordinator/config.js';
import { SWEEP_FORMAT } from '../../coordinator/sweep/sweep-dir.js';
import { CLI_MAIN, detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { snapshotDir } from '../dir-snapshot.js';

const CHROMIUM = process.env.DETSIM_CHROMIUM ?? '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM)
  ? null
  : `no Chromium at ${CHROMIUM} (apt-get install chromium, or DETSIM_CHROMIUM=<path>)`;
if (noBrowser) process.stderr.write(`test/report/report.test.ts: browser cases skipped: ${noBrowser}\n`);

const tmp = mkdtempSync(join(tmpdir(), 'detsim-report-'));

interface Step {
  behaviour: { scope: { step: string; epoch: string }; rewards: { agentId: string; value: number }[] };
  operational: { wallTimeNs: string };
}

/** The trace's steps, read here from trace/index.jsonl and the gzip segments it lists (not the library's reader). */
function stepsOf(runDir: string): Step[] {
  const index = readFileSync(join(runDir, 'trace', 'index.jsonl'), 'utf8')
    .trim()
    .split('\n');
  return index.flatMap((l) => {
    const seg = JSON.parse(l) as { segment: string };
    const text = gunzipSync(readFileSync(join(runDir, 'trace', seg.segment))).toString('utf8');
    return text
      .split('\n')
      .filter((x) => x !== '')
      .map((x) => JSON.parse(x) as Step);
  });
}

/** Reward per agent and in total, summed in step order (as the report must). */
function rewardsOf(steps: Step[]): { perAgent: Map<string, number>; total: number } {
  const perAgent = new Map<string, number>();
  let total = 0;
  for (const s of steps)
    for (const r of s.behaviour.rewards) {
      perAgent.set(r.agentId, (perAgent.get(r.agentId) ?? 0) + r.value);
      total += r.value;
    }
  return { perAgent, total };
}

/** One agent's reward per step, its running total, and its reward per bin of `bin` steps. */
function agentSeries(steps: Step[], agent: string, bin: number) {
  const perStep = steps.map((s) =>
    s.behaviour.rewards.filter((r) => r.agentId === agent).reduce((a, r) => a + r.value, 0),
  );
  let run = 0;
  const cumulative = perStep.map((v) => (run += v));
  const bins: number[] = [];
  perStep.forEach((v, i) => (bins[Math.floor(i / bin)] = (bins[Math.floor(i / bin)] ?? 0) + v));
  return { cumulative, bins };
}

/** Steps per second between consecutive steps of one epoch, from the wall times (one per interval). */
function ratesOf(steps: Step[]): number[] {
  const out: number[] = [];
  for (let i = 1; i < steps.length; i++) {
    const [a, b] = [steps[i - 1]!, steps[i]!];
    if (a.behaviour.scope.epoch !== b.behaviour.scope.epoch) continue;
    out.push(1e9 / (Number(b.operational.wallTimeNs) - Number(a.operational.wallTimeNs)));
  }
  return out;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

function ledgerOf(runDir: string): Record<string, any>[] {
  return readFileSync(join(runDir, 'ledger.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, any>);
}

/** Distinct steps at which the ledger has `event` (a recovery at the step its worker was lost). */
function ledgerSteps(runDir: string, event: string): number {
  const at = ledgerOf(runDir)
    .filter((l) => l.event === event)
    .map((l) => (event === 'recovery' ? l.detail.step : l.boundary));
  return new Set(at).size;
}

function cli(args: string[]) {
  return spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', timeout: 240_000 });
}

/** `detsim run` of a config into `out`; its run directory. */
function run(config: string, out: string, extra: string[] = []): string {
  const r = cli(['run', config, '--out', out, ...extra]);
  expect(r.status, r.stderr).toBe(0);
  return /^run directory\s+(\S+)/m.exec(r.stdout)![1]!;
}

/** A config file beside the runs: the walker example with other params and seed. */
function variant(name: string, food: number, seed: string): string {
  const text = readFileSync('examples/forage-walkers.yaml', 'utf8')
    .replace('food: 24', `food: ${food}`)
    .replace('masterSeed: "20261129"', `masterSeed: "${seed}"`);
  const path = join(tmp, `${name}.yaml`);
  writeFileSync(path, text);
  return path;
}

interface Drawn {
  id: string;
  x: number;
  series: { label: string; points: number; sum: number; min: number | null; max: number | null; last: number | null }[];
}

interface Opened {
  charts: Drawn[];
  problems: string[];
  text: string;
}

let browser: Browser | undefined;

/** Open a report page in Chromium: what it drew, console errors and foreign requests, its text; a full-page screenshot. */
async function open(file: string, shot: string): Promise<Opened> {
  browser ??= await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox'],
    timeout: 90_000,
  });
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warn') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${String(e)}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  page.on('request', (r) => {
    if (r.url() !== `file://${file}`) problems.push(`request: ${r.url()}`);
  });
  await page.setViewport({ width: 1100, height: 900 });
  await page.goto(`file://${file}`, { waitUntil: 'load' });
  const charts = (await page.evaluate('window.__detsimCharts')) as Drawn[];
  const text = (await page.evaluate('document.body.innerText')) as string;
  await page.screenshot({ path: shot as `${string}.png`, fullPage: true });
  await page.close();
  expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG');
  return { charts, problems, text };
}

function chart(o: Opened, id: string): Drawn {
  const c = o.charts.find((x) => x.id === id);
  expect(c, `chart ${id} drawn (drawn: ${o.charts.map((x) => x.id).join(', ')})`).toBeDefined();
  return c!;
}

const series = (c: Drawn, label: string) => {
  const s = c.series.find((x) => x.label === label);
  expect(s, `series ${label} of ${c.id}`).toBeDefined();
  return s!;
};

/** The run charts hold the trace's numbers: per-agent and total rewards, points per step, rates per interval. */
function expectRunCharts(o: Opened, runDir: string, epochs: number): void {
  const steps = stepsOf(runDir);
  const { perAgent, total } = rewardsOf(steps);
  const reward = chart(o, 'reward-per-agent');
  const cumulative = chart(o, 'cumulative-reward');
  expect(reward.series).toHaveLength(16);
  // 300 steps: every step a point; rewards in at most 100 bins, so 3 steps a bin (docs/guide.md "Reports").
  const bin = Math.ceil(steps.length / 100);
  for (const [agent, agentTotal] of perAgent) {
    const own = agentSeries(steps, agent, bin);
    const drawn = series(reward, agent);
    expect([drawn.points, drawn.sum, drawn.max, drawn.last]).toEqual([
      own.bins.length,
      agentTotal,
      Math.max(...own.bins),
      own.bins.at(-1),
    ]);
    const cum = series(cumulative, agent);
    expect([cum.points, cum.sum, cum.last]).toEqual([steps.length, sum(own.cumulative), agentTotal]);
  }
  expect(series(cumulative, 'all agents').last).toBe(total);
  expect(total).toBeGreaterThan(0);
  const rate = series(chart(o, 'steps-per-second'), 'steps/s');
  // One rate per interval between consecutive steps of one epoch (300 steps: one point per step).
  const rates = ratesOf(steps);
  expect(rates).toHaveLength(steps.length - epochs);
  expect(rate.points).toBe(rates.length);
  expect(rate.sum / sum(rates)).toBeCloseTo(1, 9);
  expect(rate.min! / Math.min(...rates)).toBeCloseTo(1, 9);
  expect(rate.max! / Math.max(...rates)).toBeCloseTo(1, 9);
  const timeline = chart(o, 'checkpoint-timeline');
  expect(series(timeline, 'captured').points).toBe(ledgerSteps(runDir, 'captured'));
  expect(series(timeline, 'committed').points).toBe(ledgerSteps(runDir, 'committed'));
  expect(series(timeline, 'restored').points).toBe(ledgerSteps(runDir, 'restored'));
  expect(series(timeline, 'recovery').points).toBe(ledgerSteps(runDir, 'recovery'));
  const receipt = JSON.parse(readFileSync(join(runDir, 'receipt.json'), 'utf8')) as Record<string, any>;
  const summary = JSON.parse(readFileSync(join(runDir, 'summary.json'), 'utf8')) as Record<string, any>;
  expect(o.text).toContain(`DIFF=0 against its receipt`);
  for (const id of [receipt.reproHash, summary.behaviourDigest, '20261129', 'seed-derivation-v1'])
    expect(o.text).toContain(id);
}

let plain: string;
let resumed: string;
let recovered: string;
let verifyOut: string;
let verified: string;
let sweep: string;

beforeAll(async () => {
  plain = run('examples/forage-walkers.yaml', join(tmp, 'runs'), ['--steps', '300', '--checkpoint-every', '100']);
  resumed = join(tmp, 'resumed');
  cpSync(plain, resumed, { recursive: true });
  const r = cli(['resume', resumed, '--checkpoint', 'ckpt-e1-200', '--checkpoint-every', '100']);
  expect(r.status, r.stderr).toBe(0);
  // Worker processes: the test SIGKILLs one.
  const kill = await killAtSteps(
    { ...loadConfig('examples/forage-walkers.yaml'), transport: 'unix' },
    {
      steps: 300,
      every: 50,
      maxRestarts: 1,
      kills: [{ step: 120, phase: 'commit', worker: 1 }],
      outDir: join(tmp, 'killed'),
    },
  );
  recovered = kill.runDir;
  verifyOut = join(tmp, 'verify');
  const v = cli([
    'verify',
    '--config',
    'examples/forage-walkers.yaml',
    '--out',
    verifyOut,
    '--runs-dir',
    join(tmp, 'verify-runs'),
  ]);
  expect(v.status, v.stdout + v.stderr).toBe(0);
  verified = join(tmp, 'verify-runs', readdirSync(join(tmp, 'verify-runs')).sort()[0]!);
  sweep = join(tmp, 'sweeps', 'food-1');
  const runs = [
    { config: variant('food-12', 12, '7'), dir: 'a', overrides: { 'environment.params.food': 12 }, replicate: 0 },
    { config: variant('food-24-r0', 24, '7'), dir: 'b', overrides: { 'environment.params.food': 24 }, replicate: 0 },
    { config: variant('food-24-r1', 24, '8'), dir: 'c', overrides: { 'environment.params.food': 24 }, replicate: 1 },
  ];
  const index = runs.map((x) => {
    const dir = run(x.config, join(sweep, x.dir), ['--steps', '120']);
    return { dir: dir.slice(sweep.length + 1), overrides: x.overrides, replicate: x.replicate };
  });
  writeFileSync(join(sweep, 'sweep.json'), JSON.stringify({ runs: index }, null, 1));
}, 300_000);

afterAll(async () => {
  await browser?.close();
  if (!process.env.DETSIM_REPORT_KEEP) rmSync(tmp, { recursive: true, force: true });
});

describe.skipIf(noBrowser !== null)('detsim report in headless Chromium', { timeout: 120_000 }, () => {
  it('a plain run: the page loads with no console error or request and every chart holds the trace and ledger numbers', async () => {
    const r = detsimCli(['report', plain]);
    expect(r.status, r.stderr).toBe(0);
    const file = join(plain, 'report.html');
    expect(r.stdout).toContain(`report ${file}`);
    const o = await open(file, join(tmp, 'plain.png'));
    expect(o.problems).toEqual([]);
    expectRunCharts(o, plain, 1);
  });

  it('a resumed copy: two epochs, the restore on the timeline, the same ReproHash; the previous report is replaced', async () => {
    expect(detsimCli(['report', resumed]).status).toBe(0);
    const again = detsimCli(['report', resumed]);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain('(replaced the previous report)');
    const o = await open(join(resumed, 'report.html'), join(tmp, 'resumed.png'));
    expect(o.problems).toEqual([]);
    expectRunCharts(o, resumed, 2);
    expect(ledgerSteps(resumed, 'restored')).toBe(1);
    expect(o.text).toContain('e2 from step 200');
  });

  it('a run that recovered from a SIGKILLed worker: the recovery on the timeline and in the tables', async () => {
    expect(detsimCli(['report', recovered]).status).toBe(0);
    const o = await open(join(recovered, 'report.html'), join(tmp, 'recovered.png'));
    expect(o.problems).toEqual([]);
    expectRunCharts(o, recovered, 2);
    expect(series(chart(o, 'checkpoint-timeline'), 'recovery').points).toBe(1);
    expect(o.text).toContain('Recoveries from a lost worker: 1; resumes: 0');
    expect(o.text).toMatch(/worker worker-0 worker-exited at step 120/);
    expect(o.text).toContain('signal=SIGKILL');
    if (process.env.DETSIM_REPORT_SHOT) copyFileSync(join(tmp, 'recovered.png'), process.env.DETSIM_REPORT_SHOT);
  });

  it("a run of detsim verify with its attestation: the replay that reached DIFF=0 at this run's ReproHash is named", async () => {
    const out = join(tmp, 'verified.html');
    const r = detsimCli(['report', verified, '--attestation', verifyOut, '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    const o = await open(out, join(tmp, 'verified.png'));
    expect(o.problems).toEqual([]);
    expect(o.text).toMatch(/detsim verify: .* replayed configuration forage-walkers in 2 fresh runs with DIFF=0/);
  });

  it('a sweep directory: total reward per parameter value (min/mean/max, every replicate) and per run, from the traces', async () => {
    const r = detsimCli(['report', sweep]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('sweep: 3 runs, 3 DIFF=0');
    const o = await open(join(sweep, 'report.html'), join(tmp, 'sweep.png'));
    expect(o.problems).toEqual([]);
    const index = JSON.parse(readFileSync(join(sweep, 'sweep.json'), 'utf8')).runs as { dir: string }[];
    const totals = index.map((x) => rewardsOf(stepsOf(join(sweep, x.dir))).total);
    const param = chart(o, 'sweep-param-0');
    expect(param.x).toBe(2);
    // Means in value order (12, then 24 over two replicates); min and max of 24 are its two replicates.
    expect(series(param, 'mean').sum).toBeCloseTo(totals[0]! + (totals[1]! + totals[2]!) / 2, 9);
    expect(series(param, 'max').last).toBe(Math.max(totals[1]!, totals[2]!));
    expect(series(param, 'min').last).toBe(Math.min(totals[1]!, totals[2]!));
    expect(series(param, 'replicate 0').points).toBe(2);
    expect(series(param, 'replicate 1').points).toBe(1);
    const perRun = series(chart(o, 'sweep-runs'), 'total reward');
    expect(perRun.points).toBe(3);
    expect(perRun.sum).toBe(totals[0]! + totals[1]! + totals[2]!);
    expect(o.text).toContain('Total reward by environment.params.food');
  });
});

describe('detsim report refusals', () => {
  it('a tampered trace segment is refused naming the file, exit 1, and nothing is written', () => {
    const damaged = join(tmp, 'damaged');
    cpSync(plain, damaged, { recursive: true });
    const seg = join(damaged, 'trace', '000001.jsonl.gz');
    const bytes = readFileSync(seg);
    bytes[bytes.length - 12] = bytes[bytes.length - 12]! ^ 0xff;
    writeFileSync(seg, bytes);
    const before = snapshotDir(damaged);
    const r = detsimCli(['report', damaged]);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^detsim: \[audit_trace_segment_tampered\] /);
    expect(lines[0]).toContain(seg);
    expect(snapshotDir(damaged)).toEqual(before);
  });

  it('a receipt.json whose ReproHash the run no longer gives: the page says DIFF≠0 and the command exits 1', () => {
    const edited = join(tmp, 'edited-receipt');
    cpSync(plain, edited, { recursive: true });
    const path = join(edited, 'receipt.json');
    const receipt = JSON.parse(readFileSync(path, 'utf8')) as Record<string, any>;
    const recorded = receipt.reproHash as string;
    writeFileSync(path, JSON.stringify({ ...receipt, reproHash: '0000000000000000' }));
    const r = detsimCli(['report', edited]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`DIFF≠0 against receipt.json: ReproHash ${recorded}`);
    expect(r.stderr.trim().split('\n')).toEqual([
      `detsim: [audit_report_receipt_differs] ${edited}/receipt.json records ReproHash 0000000000000000, the run gives ${recorded}`,
    ]);
    expect(readFileSync(join(edited, 'report.html'), 'utf8')).toContain('<b>DIFF≠0</b> against its receipt');
  });

  it('a ledger whose chain is broken: the page is written, the terminal names the line, exit 1', () => {
    const edited = join(tmp, 'edited-ledger');
    cpSync(plain, edited, { recursive: true });
    const path = join(edited, 'ledger.jsonl');
    const lines = readFileSync(path, 'utf8').split('\n');
    lines[1] = lines[1]!.replace(/"epoch":"e1"/, '"epoch":"e9"');
    writeFileSync(path, lines.join('\n'));
    const r = detsimCli(['report', edited]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^DIFF=0 against receipt\.json/m);
    expect(r.stderr.trim()).toMatch(new RegExp(`^detsim: \\[audit_ledger_chain\\] ${path} line 2: line 2 was changed`));
    expect(existsSync(join(edited, 'report.html'))).toBe(true);
  });

  it('a run that has not ended (no receipt.json, no summary.json): a page without a verdict, and the line says why', () => {
    const unended = join(tmp, 'unended');
    cpSync(plain, unended, { recursive: true });
    rmSync(join(unended, 'receipt.json'));
    rmSync(join(unended, 'summary.json'));
    const r = detsimCli(['report', unended]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^no receipt\.json: no DIFF=0 verdict \(\d+ steps read; the run has not ended: still running, or killed\)$/m,
    );
    expect(existsSync(join(unended, 'report.html'))).toBe(true);
  });

  it('an existing --out, or a report.html detsim did not write, is never overwritten (exit 2)', () => {
    const out = join(tmp, 'mine.html');
    writeFileSync(out, 'my notes\n');
    expectCliRefusal(detsimCli(['report', plain, '--out', out]), 'perm_report_exists', out);
    expect(readFileSync(out, 'utf8')).toBe('my notes\n');
    const foreign = join(tmp, 'foreign');
    cpSync(plain, foreign, { recursive: true });
    writeFileSync(join(foreign, 'report.html'), '<!DOCTYPE html>\n<p>not a detsim report</p>\n');
    expectCliRefusal(detsimCli(['report', foreign]), 'perm_report_exists', join(foreign, 'report.html'));
    expect(readFileSync(join(foreign, 'report.html'), 'utf8')).toContain('not a detsim report');
  });

  it('a sweep with a planned run missing says so, on the page and the terminal (not "N of N completed")', () => {
    const partial = join(tmp, 'sweep-partial');
    cpSync(sweep, partial, { recursive: true });
    rmSync(join(partial, 'report.html'), { force: true });
    // As detsim sweep writes it: its own format lists every planned run, started or not.
    const index = JSON.parse(readFileSync(join(partial, 'sweep.json'), 'utf8')) as { runs: { dir: string }[] };
    writeFileSync(join(partial, 'sweep.json'), JSON.stringify({ format: SWEEP_FORMAT, ...index }));
    rmSync(join(partial, index.runs[1]!.dir), { recursive: true });
    const r = detsimCli(['report', partial]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('sweep: 2 runs of the 3 planned (1 without a run directory), 2 DIFF=0');
    const html = readFileSync(join(partial, 'report.html'), 'utf8');
    expect(html).toContain('of 3 completed.');
    expect(html).toContain('<b>1 of the 3 runs sweep.json plans have no run directory</b>');
  });

  it('a path that is no run, a sweep.json of the wrong shape and a changed attestation are refused, naming them', () => {
    const empty = mkdtempSync(join(tmp, 'empty-'));
    expectCliRefusal(detsimCli(['report', empty]), 'struct_report_source', empty);
    expectCliRefusal(detsimCli(['report', join(tmp, 'nowhere')]), 'struct_report_source', join(tmp, 'nowhere'));
    const bad = mkdtempSync(join(tmp, 'badsweep-'));
    writeFileSync(join(bad, 'sweep.json'), JSON.stringify({ runs: [{ dir: 'missing', overrides: {}, replicate: 0 }] }));
    expectCliRefusal(detsimCli(['report', bad]), 'struct_sweep_index', join(bad, 'sweep.json'));
    writeFileSync(join(bad, 'sweep.json'), JSON.stringify({ runs: [{ dir: plain, replicate: -1 }] }));
    const line = expectCliRefusal(detsimCli(['report', bad]), 'struct_sweep_index', join(bad, 'sweep.json'));
    expect(line).toContain('runs[0].replicate');
    const edited = join(tmp, 'edited-attestation.jsonl');
    writeFileSync(
      edited,
      readFileSync(join(verifyOut, 'attestation.jsonl'), 'utf8').replace('"status":"pass"', '"status":"warn"'),
    );
    const r = detsimCli(['report', verified, '--attestation', edited, '--out', join(tmp, 'never.html')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^detsim: \[audit_evidence_recheck_failed\] .*edited-attestation\.jsonl: verdict_hash/);
    expect(existsSync(join(tmp, 'never.html'))).toBe(false);
  });
});
