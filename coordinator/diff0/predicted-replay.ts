// `detsim replay --predict` as a library function: before the first run, append what the replay is
// expected to give to `<out>/ledger.jsonl` — a run directory's receipt.json (its reproHash and
// summary.behaviourDigest), or a config's golden — then replay, chaining each run's observation and
// the evaluation after it, and add the prediction, prediction-order and ledger checks to the report.
// It does not replay itself (replay.ts) nor define the entries (prediction.ts, prediction-ledger.ts).
import { loadConfig } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { DEFAULT_RUNS_DIR } from '../session/run.js';
import { LEDGER_FILE } from '../store/ledger.js';
import { DEFAULT_GOLDEN_DIR, exampleName } from './goldens.js';
import {
  type Evaluated,
  type Prediction,
  PredictionLedger,
  predictionFromGolden,
  predictionFromReceipt,
} from './prediction.js';
import { isRunDir, replay, type ReplayOptions, type ReplayReport } from './replay.js';
import { join } from 'node:path';

/** Options of {@link predictedReplay}: a replay's, plus where a config's golden lies. */
export interface PredictedReplayOptions extends ReplayOptions {
  /** Directory of goldens for a config source (default fixtures/golden). */
  readonly goldenDir?: string;
}

/** A replay whose outcome was predicted: the report (with the prediction checks), the prediction and its evaluation. */
export interface PredictedReplay {
  readonly report: ReplayReport;
  /** The ledger file the prediction and its evidence were appended to. */
  readonly ledger: string;
  readonly evaluated: Evaluated;
}

/** The prediction of a replay source, refused (before anything runs) when there is nothing to predict from. */
export function replayPrediction(source: string, opts: PredictedReplayOptions): Prediction {
  const runs = opts.runs ?? 2;
  let p: Prediction;
  if (isRunDir(source)) p = predictionFromReceipt(source, runs);
  else {
    const plan = loadConfig(source);
    const name = exampleName(source);
    const base = { subject: plan.sessionId, sessionId: plan.sessionId, command: 'replay' as const, runs };
    p = predictionFromGolden(opts.goldenDir ?? DEFAULT_GOLDEN_DIR, name, { ...base, steps: plan.steps });
    if (p.expected === null)
      throw new DetsimError(
        'meta_prediction_missing',
        `--predict: ${source} has ${p.why} in ${opts.goldenDir ?? DEFAULT_GOLDEN_DIR}; a configuration is predicted from its golden (or replay a run directory, predicted from its receipt)`,
        '--predict',
      );
  }
  if (opts.steps !== undefined && opts.steps !== p.steps)
    throw new DetsimError(
      'struct_invalid_field',
      `--steps: ${opts.steps} is not the ${p.steps} steps the prediction (${p.source!.kind} ${p.source!.file}) holds for; leave --steps out`,
      '--steps',
    );
  return p;
}

/** Predict, ledger the prediction, replay at the predicted steps, ledger the evidence, and judge. */
export async function predictedReplay(source: string, opts: PredictedReplayOptions = {}): Promise<PredictedReplay> {
  const prediction = replayPrediction(source, opts);
  const dir = opts.outDir ?? DEFAULT_RUNS_DIR;
  const book = await PredictionLedger.open(dir, 'detsim replay --predict');
  try {
    const open = await book.predict(prediction);
    const report = await replay(source, {
      ...opts,
      steps: prediction.steps,
      onRun: (i, run) => {
        const summary = run.receipt.head.summary as { behaviourDigest?: unknown } | null;
        const behaviourDigest = typeof summary?.behaviourDigest === 'string' ? summary.behaviourDigest : null;
        open.observe(i, { ...run, behaviourDigest });
        opts.onRun?.(i, run);
      },
    });
    const evaluated = await open.evaluate();
    const checks = await book.finish(report.subject);
    return { report: { ...report, checks: [...report.checks, ...checks] }, ledger: join(dir, LEDGER_FILE), evaluated };
  } finally {
    book.release();
  }
}
