// What each chart of a run report plots, as plain data the page draws (page.ts): reward per agent,
// cumulative reward, steps per second and the checkpoint timeline of one run. The sweep's charts
// are built in sweep.ts with the same shapes. NOT the drawing (page.ts) or the HTML (html.ts).
import type { RunData } from './read-run.js';
import { TIMELINE_LANES } from './run-facts.js';
import { REWARD_BINS } from './series.js';

/** One series of a chart: its values at the chart's x, drawn as a line, dashed line or points. */
export interface SeriesSpec {
  label: string;
  values: (number | null)[];
  style: 'line' | 'dashed' | 'points';
  /** Colour index (series of one sweep group share it); default the series' position. */
  color?: number;
  /** Drawn against the right-hand axis (e.g. the total beside per-agent values). */
  right?: boolean;
}

/** A chart: x values (ascending) and its series; categorical axes label integer positions. */
export interface ChartSpec {
  id: string;
  title: string;
  note: string;
  xLabel: string;
  yLabel: string;
  rightLabel?: string;
  x: number[];
  series: SeriesSpec[];
  xCategories?: string[];
  yCategories?: string[];
}

function per(bucket: number): string {
  return bucket === 1 ? 'per step' : `per ${bucket}-step bucket`;
}

function sampling(d: RunData): string {
  const s = d.series;
  const drawn =
    s.agentsNotDrawn > 0
      ? `; the first ${s.agents.length} agents drawn, ${s.agentsNotDrawn} more in the totals only`
      : '';
  const b =
    s.bucket === 1 ? 'every step is a point' : `downsampled: one point per ${s.bucket} steps, x = a bucket's last step`;
  return `${s.steps} steps, ${b}${drawn}`;
}

function rewardCharts(d: RunData): ChartSpec[] {
  const s = d.series;
  return [
    {
      id: 'reward-per-agent',
      title: `Reward per agent (${per(s.rewardBin)})`,
      note: `From the trace's rewards: each agent's reward summed ${per(s.rewardBin)} (at most ${REWARD_BINS} bins; x = a bin's last step); ${sampling(d)}.`,
      xLabel: 'step',
      yLabel: `reward ${per(s.rewardBin)}`,
      x: s.rewardX,
      series: s.agents.map((a, i) => ({ label: a, values: s.rewardPerBin[i]!, style: 'line' })),
    },
    {
      id: 'cumulative-reward',
      title: 'Cumulative reward',
      note: `Each agent's reward up to each point (left axis) and all agents' together (right axis); ${sampling(d)}.`,
      xLabel: 'step',
      yLabel: 'cumulative reward per agent',
      rightLabel: 'all agents',
      x: s.x,
      series: [
        ...s.agents.map((a, i): SeriesSpec => ({ label: a, values: s.cumulative[i]!, style: 'line' })),
        { label: 'all agents', values: s.totalCumulative, style: 'dashed', right: true },
      ],
    },
  ];
}

function rateChart(d: RunData): ChartSpec {
  const s = d.series;
  const epochs = s.epochs.map((e) => `${e.epoch} from step ${e.fromStep}`).join(', ');
  return {
    id: 'steps-per-second',
    title: 'Steps per second',
    note:
      `From the steps' physical wall times (trace operational.wallTimeNs): steps over the wall time between consecutive steps of one epoch, ${per(s.bucket)}. ` +
      `Epochs: ${epochs || 'none'} (a new epoch restarts the clock; the gap is not counted).`,
    xLabel: 'step',
    yLabel: 'steps/s',
    x: s.x,
    series: [{ label: 'steps/s', values: s.stepsPerSecond, style: 'line' }],
  };
}

/** The ledger's checkpoint events in lanes by step (null: the run has no ledger or no such event). */
function timelineChart(d: RunData): ChartSpec | null {
  const events = d.ledger.timeline;
  if (events.length === 0) return null;
  const x = [...new Set(events.map((e) => e.step))].sort((a, b) => a - b);
  const at = new Map(x.map((v, i) => [v, i]));
  const series: SeriesSpec[] = TIMELINE_LANES.map((lane, li) => {
    const values: (number | null)[] = x.map(() => null);
    for (const e of events) if (e.lane === lane) values[at.get(e.step)!] = li;
    return { label: lane, values, style: 'points' };
  });
  return {
    id: 'checkpoint-timeline',
    title: 'Checkpoint timeline',
    note: 'From ledger.jsonl (it records steps, not times): captures, commits (durable), captures not committed (failed, superseded, not durable), restores (resume or recovery) at their boundary, and recoveries at the step the worker was lost. Every event is listed below.',
    xLabel: 'step',
    yLabel: '',
    x,
    series,
    yCategories: [...TIMELINE_LANES],
  };
}

/** The charts of one run's report, in page order. */
export function runCharts(d: RunData): ChartSpec[] {
  const timeline = timelineChart(d);
  return [...rewardCharts(d), rateChart(d), ...(timeline ? [timeline] : [])];
}
