// A tiny dependency-free SVG writer for the bench charts: a line chart (x/y axes with ticks, one
// polyline per series, legend) and a horizontal bar chart (one bar per row, a reference line).
// NOT a plotting library: no layout engine, fixed sizes, linear scales only.

export interface LineSeries {
  name: string;
  points: [number, number][];
  /** Dashed stroke, e.g. for a limit drawn beside the figure it bounds. */
  dashed?: boolean;
  /** Index into the palette (series sharing a colour share an index). */
  color?: number;
}

export interface LineChart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  /** Optional extra line under the title (machine, load, run time). */
  subtitle?: string;
}

export interface BarRow {
  label: string;
  /** null: no bar (the row has no ratio), only its text. */
  value: number | null;
  /** Text printed right of the bar. */
  text: string;
}

export interface BarChart {
  title: string;
  xLabel: string;
  rows: BarRow[];
  /** A vertical reference line (e.g. 1× = the limit) and its legend text. */
  reference?: { value: number; label: string };
  barLegend: string;
  subtitle?: string;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const FONT = 'font-family="sans-serif"';

/** Escape text for an SVG text node or attribute. */
export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Round tick values: 1, 2 or 5 × 10^k steps covering [0, max]. */
export function ticks(max: number, target = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  if (out.at(-1)! < max) out.push(Number((out.at(-1)! + step).toPrecision(12)));
  return out;
}

function fmt(v: number): string {
  return v.toLocaleString('en-US', { maximumFractionDigits: Math.abs(v) >= 10 ? 0 : 2 });
}

function header(width: number, height: number, title: string, subtitle?: string): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold" ${FONT}>${esc(title)}</text>`,
    ...(subtitle
      ? [
          `<text x="${width / 2}" y="40" text-anchor="middle" font-size="11" fill="#555" ${FONT}>${esc(subtitle)}</text>`,
        ]
      : []),
  ];
}

/** A line chart with linear axes from 0, ticks, axis labels and a legend on the right. */
export function lineChart(c: LineChart): string {
  const W = 820;
  const H = 460;
  const m = { left: 80, right: 250, top: 56, bottom: 56 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const xs = c.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = c.series.flatMap((s) => s.points.map((p) => p[1]));
  const xt = ticks(Math.max(1, ...xs));
  const yt = ticks(Math.max(1, ...ys));
  const X = (x: number): number => m.left + (x / xt.at(-1)!) * pw;
  const Y = (y: number): number => m.top + ph - (y / yt.at(-1)!) * ph;
  const out = header(W, H, c.title, c.subtitle);
  for (const t of yt) {
    out.push(`<line x1="${m.left}" y1="${Y(t)}" x2="${m.left + pw}" y2="${Y(t)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.left - 6}" y="${Y(t) + 4}" text-anchor="end" font-size="11" ${FONT}>${fmt(t)}</text>`);
  }
  for (const t of xt)
    out.push(`<text x="${X(t)}" y="${m.top + ph + 16}" text-anchor="middle" font-size="11" ${FONT}>${fmt(t)}</text>`);
  out.push(`<line x1="${m.left}" y1="${m.top + ph}" x2="${m.left + pw}" y2="${m.top + ph}" stroke="black"/>`);
  out.push(`<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + ph}" stroke="black"/>`);
  out.push(
    `<text x="${m.left + pw / 2}" y="${H - 14}" text-anchor="middle" font-size="12" ${FONT}>${esc(c.xLabel)}</text>`,
  );
  out.push(
    `<text transform="translate(18 ${m.top + ph / 2}) rotate(-90)" text-anchor="middle" font-size="12" ${FONT}>${esc(c.yLabel)}</text>`,
  );
  c.series.forEach((s, i) => {
    const color = PALETTE[(s.color ?? i) % PALETTE.length]!;
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    const pts = [...s.points].sort((a, b) => a[0] - b[0]);
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${pts.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ')}"/>`,
    );
    for (const p of pts)
      out.push(
        `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="3" fill="${s.dashed ? 'white' : color}" stroke="${color}"/>`,
      );
    const ly = m.top + 8 + i * 18;
    const lx = m.left + pw + 16;
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${lx + 30}" y="${ly + 4}" font-size="11" ${FONT}>${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** Horizontal bars from 0 with an x axis, row labels on the left, text right of each bar. */
export function barChart(c: BarChart): string {
  const W = 980;
  const rowH = 26;
  const m = { left: 380, right: 250, top: 76, bottom: 50 };
  const pw = W - m.left - m.right;
  const ph = Math.max(1, c.rows.length) * rowH;
  const H = m.top + ph + m.bottom;
  const vals = c.rows.flatMap((r) => (r.value === null ? [] : [r.value]));
  const xt = ticks(Math.max(c.reference?.value ?? 0, ...vals, 1e-9));
  const X = (x: number): number => m.left + (x / xt.at(-1)!) * pw;
  const out = header(W, H, c.title, c.subtitle);
  out.push(
    `<rect x="${m.left}" y="50" width="14" height="10" fill="${PALETTE[0]}"/><text x="${m.left + 20}" y="59" font-size="11" ${FONT}>${esc(c.barLegend)}</text>`,
  );
  if (c.reference)
    out.push(
      `<line x1="${m.left + 350}" y1="55" x2="${m.left + 374}" y2="55" stroke="${PALETTE[1]}" stroke-width="2" stroke-dasharray="5 3"/><text x="${m.left + 380}" y="59" font-size="11" ${FONT}>${esc(c.reference.label)}</text>`,
    );
  for (const t of xt) {
    out.push(`<line x1="${X(t)}" y1="${m.top}" x2="${X(t)}" y2="${m.top + ph}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${X(t)}" y="${m.top + ph + 16}" text-anchor="middle" font-size="11" ${FONT}>${fmt(t)}</text>`);
  }
  c.rows.forEach((r, i) => {
    const y = m.top + i * rowH;
    out.push(
      `<text x="${m.left - 8}" y="${y + rowH / 2 + 4}" text-anchor="end" font-size="11" ${FONT}>${esc(r.label)}</text>`,
    );
    if (r.value !== null)
      out.push(
        `<rect x="${m.left}" y="${y + 5}" width="${Math.max(0.5, X(r.value) - m.left).toFixed(1)}" height="${rowH - 10}" fill="${PALETTE[0]}"/>`,
      );
    const tx = r.value === null ? m.left + 4 : X(r.value) + 6;
    out.push(`<text x="${tx.toFixed(1)}" y="${y + rowH / 2 + 4}" font-size="11" ${FONT}>${esc(r.text)}</text>`);
  });
  out.push(`<line x1="${m.left}" y1="${m.top + ph}" x2="${m.left + pw}" y2="${m.top + ph}" stroke="black"/>`);
  out.push(`<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + ph}" stroke="black"/>`);
  if (c.reference)
    out.push(
      `<line x1="${X(c.reference.value)}" y1="${m.top - 4}" x2="${X(c.reference.value)}" y2="${m.top + ph}" stroke="${PALETTE[1]}" stroke-width="2" stroke-dasharray="5 3"/>`,
    );
  out.push(
    `<text x="${m.left + pw / 2}" y="${H - 12}" text-anchor="middle" font-size="12" ${FONT}>${esc(c.xLabel)}</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
