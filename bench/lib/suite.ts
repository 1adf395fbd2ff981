// The contract between the bench harness (bench/run.ts) and its suites: a suite measures and
// returns figures, each beside its limit measured in the same run. NOT a measurement itself.
// Adding a suite: one file in bench/suites/ exporting a BenchSuite, one line in bench/suites/index.ts.

/** What a figure is compared with: a baseline doing the unavoidable part of the work, same run. */
export interface Limit {
  /** What the limit measures, e.g. "JSON.stringify of the same value". */
  name: string;
  value: number;
  /** Always the figure's unit, so that the ratio is dimensionless. */
  unit: string;
}

export interface Figure {
  /** Stable id within the suite, e.g. "canonicalize.manifest". */
  id: string;
  /** Human description, e.g. "canonicalize the reference manifest (2.1 KB)". */
  name: string;
  value: number;
  unit: string;
  /** true when a larger value is better (throughput), false for times and sizes. */
  higherIsBetter: boolean;
  limit: Limit | null;
  /** value ÷ limit.value (null without a limit). For throughput, 1 means as fast as the limit. */
  ratio: number | null;
  /** Relative margin of error of the figure's mean, percent (tinybench rme), when sampled. */
  rmePercent?: number;
  samples?: number;
  note?: string;
}

export interface SuiteContext {
  /** --quick: finish in seconds (smaller inputs, shorter sampling); figures are still real. */
  quick: boolean;
  /** A scratch directory for this run (removed afterwards). */
  tmpDir: string;
  /** Progress lines on stderr (stdout carries the table). */
  log(message: string): void;
}

export interface SuiteResult {
  figures: Figure[];
  /** Anything else worth keeping in the receipt (sizes, versions, parameters). */
  details?: Record<string, unknown>;
}

export interface BenchSuite {
  /** The name on the command line: `npm run bench -- <name>`. */
  name: string;
  description: string;
  run(ctx: SuiteContext): Promise<SuiteResult>;
}

/** A figure beside its limit; the ratio is computed here so every suite computes it the same way. */
export function withLimit(f: Omit<Figure, 'limit' | 'ratio'>, limit: { name: string; value: number } | null): Figure {
  if (!limit) return { ...f, limit: null, ratio: null };
  return {
    ...f,
    limit: { name: limit.name, value: limit.value, unit: f.unit },
    ratio: limit.value > 0 ? f.value / limit.value : null,
  };
}
