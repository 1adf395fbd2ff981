// The bench receipt (bench/results/<timestamp>.json) and the printed table. Evidence class
// "measured": every figure came from this run on this machine. NOT a place for made-up numbers.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { arch, cpus, loadavg, platform, release, totalmem, version as osVersion } from 'node:os';
import { join } from 'node:path';
import type { Figure, SuiteResult } from './suite.js';

export interface Machine {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  node: string;
  os: string;
  arch: string;
  /** 1/5/15-minute load averages when the run started: the machine is shared. */
  loadAverage: number[];
}

export interface SuiteReceipt extends SuiteResult {
  name: string;
  description: string;
  seconds: number;
}

export interface Receipt {
  evidence_class: 'measured';
  measure_source: string;
  measure_ts: string;
  machine: Machine;
  git: { commit: string | null; dirty: boolean | null };
  quick: boolean;
  suites: SuiteReceipt[];
}

export function machineInfo(): Machine {
  const c = cpus();
  return {
    cpuModel: c[0]?.model.trim() ?? 'unknown',
    cores: c.length,
    memoryBytes: totalmem(),
    node: process.version,
    os: `${platform()} ${release()} (${osVersion()})`,
    arch: arch(),
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

export function gitInfo(cwd: string): Receipt['git'] {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return { commit, dirty: status.trim() !== '' };
  } catch {
    return { commit: null, dirty: null };
  }
}

/** The exact command line of this process, as it could be typed again from the repo root. */
export function commandLine(): string {
  const quote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  const script = process.argv[1] ? process.argv[1].replace(`${process.cwd()}/`, '') : '';
  return ['node', ...process.execArgv, script, ...process.argv.slice(2)].map(quote).join(' ');
}

/** Write the receipt atomically as <dir>/<timestamp>.json; returns the path. */
export function writeReceipt(dir: string, receipt: Receipt): string {
  mkdirSync(dir, { recursive: true });
  const name = `${receipt.measure_ts.replace(/[:.]/g, '-')}.json`;
  const path = join(dir, name);
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(receipt, null, 2)}\n`);
  renameSync(tmp, path);
  return path;
}

function num(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2;
  return x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** A markdown table: one row per figure, with its limit and the ratio. */
export function table(suites: SuiteReceipt[]): string {
  const rows = [
    '| suite | figure | value | ± | limit (same run) | limit value | ratio |',
    '| --- | --- | --: | --: | --- | --: | --: |',
  ];
  for (const s of suites) {
    for (const f of s.figures as Figure[]) {
      const rme = f.rmePercent === undefined ? '' : `${f.rmePercent.toFixed(1)}%`;
      const limit = f.limit ? f.limit.name : '—';
      const lv = f.limit ? `${num(f.limit.value)} ${f.limit.unit}` : '—';
      const ratio = f.ratio === null ? '—' : `${f.ratio.toFixed(2)}×`;
      rows.push(`| ${s.name} | ${f.name} | ${num(f.value)} ${f.unit} | ${rme} | ${limit} | ${lv} | ${ratio} |`);
    }
  }
  return rows.join('\n');
}
