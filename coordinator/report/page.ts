// The report page's own script, run in the browser: it reads the chart data inlined in the page
// (the JSON of charts.ts ChartSpec) and draws each chart with uPlot (inlined beside it); after a
// chart is drawn it records in `window.__detsimCharts` what uPlot holds — per series the points
// drawn, their sum, min, max and last value — so a test (or a reader's console) can check the page
// against the trace. These functions run in the page, not in Node: each is inlined with
// Function.prototype.toString (PAGE_SCRIPT), so they use nothing of this module but each other.
// NOT the HTML around them (html.ts) and not what is plotted (charts.ts, sweep.ts).
import type { ChartSpec, SeriesSpec } from './charts.js';

/* The few DOM shapes the page uses (the project compiles without the DOM library). */
interface PageElement {
  className: string;
  textContent: string | null;
  appendChild(child: PageElement): PageElement;
}
interface PageDocument {
  getElementById(id: string): PageElement | null;
  createElement(tag: string): PageElement;
}
interface PlotLike {
  data: (number | null)[][];
  series: { label?: string }[];
}
type PlotConstructor = new (opts: object, data: (number | null)[][], target: PageElement) => PlotLike;
/** One drawn chart as the page records it. */
export interface DrawnChart {
  id: string;
  x: number;
  series: { label: string; points: number; sum: number; min: number | null; max: number | null; last: number | null }[];
}
interface PageWindow {
  document: PageDocument;
  uPlot: PlotConstructor;
  __detsimCharts?: DrawnChart[];
}

/** A distinct colour for series `i`. */
export function colorOf(i: number): string {
  return `hsl(${Math.round((i * 137.508) % 360)}, 65%, 42%)`;
}

/** uPlot's options for one series. */
export function seriesOptions(s: SeriesSpec, i: number): object {
  const stroke = colorOf(s.color ?? i);
  const scale = s.right ? 'right' : 'y';
  if (s.style === 'points')
    return {
      label: s.label,
      stroke,
      fill: stroke,
      scale,
      paths: () => null,
      points: { show: true, size: 8, fill: stroke },
    };
  return {
    label: s.label,
    stroke,
    scale,
    width: 1.5,
    spanGaps: false,
    dash: s.style === 'dashed' ? [6, 4] : undefined,
  };
}

/** An axis that labels integer positions with names (categorical), or a plain one. */
export function axisOptions(label: string, categories: string[] | undefined, side: number, scale: string): object {
  const base = {
    label,
    side,
    scale,
    stroke: '#333',
    grid: { stroke: '#e4e4e4', show: side !== 1 },
    size: side === 1 ? 80 : 60,
  };
  if (categories === undefined) return base;
  return {
    ...base,
    splits: () => categories.map((_, i) => i),
    values: (_u: unknown, splits: number[]) => splits.map((v) => categories[v] ?? ''),
    size: 90,
  };
}

/** What uPlot holds for a chart, recorded once it has drawn it (replacing an earlier record of the same chart). */
export function recordDrawn(w: PageWindow, spec: ChartSpec, u: PlotLike): void {
  const series = u.data.slice(1).map((values, i) => {
    const drawn = values.filter((v): v is number => v !== null && v !== undefined && Number.isFinite(v));
    return {
      label: String(u.series[i + 1]?.label ?? ''),
      points: drawn.length,
      sum: drawn.reduce((a, b) => a + b, 0),
      min: drawn.length ? Math.min(...drawn) : null,
      max: drawn.length ? Math.max(...drawn) : null,
      last: drawn.length ? drawn[drawn.length - 1]! : null,
    };
  });
  const list = (w.__detsimCharts ??= []);
  const entry = { id: spec.id, x: u.data[0]!.length, series };
  const at = list.findIndex((c) => c.id === spec.id);
  if (at >= 0) list[at] = entry;
  else list.push(entry);
}

/** Draw one chart into its placeholder `chart-<id>`. */
export function drawChart(w: PageWindow, spec: ChartSpec): void {
  const target = w.document.getElementById(`chart-${spec.id}`);
  if (target === null) throw new Error(`no placeholder for chart ${spec.id}`);
  const right = spec.series.some((s) => s.right);
  const cats = spec.xCategories;
  const ycats = spec.yCategories;
  const opts = {
    width: 980,
    height: ycats ? 260 : 320,
    legend: { live: spec.series.length <= 24 },
    cursor: { points: { show: false } },
    scales: {
      x: { time: false, ...(cats ? { range: [-0.5, cats.length - 0.5] } : {}) },
      ...(ycats ? { y: { range: [-0.5, ycats.length - 0.5] } } : {}),
    },
    axes: [
      axisOptions(spec.xLabel, cats, 2, 'x'),
      axisOptions(spec.yLabel, ycats, 3, 'y'),
      ...(right ? [axisOptions(spec.rightLabel ?? '', undefined, 1, 'right')] : []),
    ],
    series: [{ label: spec.xLabel }, ...spec.series.map((s, i) => seriesOptions(s, i))],
    hooks: { draw: [(u: PlotLike) => recordDrawn(w, spec, u)] },
  };
  new w.uPlot(opts, [spec.x, ...spec.series.map((s) => s.values)], target);
}

/** Draw every chart of the page from its inlined data (`<script id="detsim-data">`). */
export function drawReport(w: PageWindow): void {
  const node = w.document.getElementById('detsim-data');
  const data = JSON.parse(node?.textContent ?? '{"charts":[]}') as { charts: ChartSpec[] };
  w.__detsimCharts = [];
  for (const spec of data.charts) drawChart(w, spec);
}

/**
 * The page script: the functions above as source text, then the call that draws the page. Run from
 * source (tsx, vitest), esbuild wraps named functions in `__name(fn, "name")`; the page defines it
 * as the identity so that text runs there too (tsc's output, dist/, has no such calls).
 */
export const PAGE_SCRIPT = [colorOf, seriesOptions, axisOptions, recordDrawn, drawChart, drawReport]
  .map((f) => f.toString())
  .concat('drawReport(window);')
  .reduce((text, part) => `${text}\n${part}`, 'function __name(f) { return f; }');
