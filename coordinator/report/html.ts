// The report as one self-contained HTML page: every text escaped, the charts' data inlined as JSON,
// uPlot (the chart library, MIT, one file) and its stylesheet inlined, the page script (page.ts)
// inlined, and a Content-Security-Policy that lets the page load nothing from anywhere (no network,
// no fonts, no CDN). The page's first lines mark it as detsim's own (REPORT_MARK), which is how
// write.ts knows a previous report it may replace. NOT what is plotted (charts.ts, sweep.ts).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ChartSpec } from './charts.js';
import { PAGE_SCRIPT } from './page.js';

/** The first line after the doctype of every page detsim report writes. */
export const REPORT_MARK = '<!-- detsim report: detsim-report-v1 -->';

const require = createRequire(import.meta.url);

/** uPlot's browser build and stylesheet, read from the installed package (inlined into every page). */
function chartLibrary(): { js: string; css: string } {
  return {
    js: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
    css: readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
  };
}

/** Text for HTML (element content and attribute values). */
export function esc(text: unknown): string {
  return String(text ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** Already-made HTML (never user text) for a table cell. */
export interface Html {
  html: string;
}
export const code = (text: unknown): Html => ({ html: `<code>${esc(text)}</code>` });
type Cell = string | number | null | Html;

const cell = (c: Cell): string => (c !== null && typeof c === 'object' ? c.html : esc(c ?? '—'));

export function table(headers: string[], rows: Cell[][], cls = ''): string {
  const head = `<tr>${headers.map((h) => `<th>${esc(h)}</th>`).join('')}</tr>`;
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${cell(c)}</td>`).join('')}</tr>`).join('\n');
  return `<table class="${esc(cls)}"><thead>${head}</thead><tbody>\n${body}\n</tbody></table>`;
}

/** Two-column facts: a name and its value. */
export function facts(rows: [string, Cell][]): string {
  return `<table class="facts"><tbody>\n${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${cell(v)}</td></tr>`).join('\n')}\n</tbody></table>`;
}

/** A chart's section: its title, what it shows, and the placeholder the page draws into. */
export function chartSection(c: ChartSpec): string {
  return `<section class="chart"><h2>${esc(c.title)}</h2><p class="note">${esc(c.note)}</p><div id="chart-${esc(c.id)}"></div></section>`;
}

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1d; margin: 24px auto; max-width: 1020px; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin: 28px 0 6px; }
.meta, .note { color: #555; } .note { margin: 0 0 8px; font-size: 13px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
table.facts th { background: #f6f6f6; white-space: nowrap; }
code { font: 12px ui-monospace, monospace; word-break: break-all; }
.verdict { padding: 10px 14px; border-radius: 6px; margin: 12px 0; border: 1px solid; }
.verdict.green { background: #e9f7ec; border-color: #3c9a52; } .verdict.red { background: #fdecec; border-color: #c0392b; }
.verdict.grey { background: #f3f3f3; border-color: #aaa; } .verdict.yellow { background: #fff7e0; border-color: #d4a017; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
footer { margin-top: 32px; color: #777; font-size: 12px; }
`;

/** The whole page: head (policy, styles), body sections, then the data, uPlot and the page script. */
export function page(title: string, body: string, charts: ChartSpec[]): string {
  const lib = chartLibrary();
  const data = JSON.stringify({ charts }).replace(/</g, '\\u003c');
  return `<!DOCTYPE html>
${REPORT_MARK}
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="detsim report">
<title>${esc(title)}</title>
<style>${lib.css}</style>
<style>${STYLE}</style>
</head><body>
${body}
<footer>Made by <code>detsim report</code> at ${esc(new Date().toISOString())}. Self-contained: the data, the chart library (uPlot, MIT licence, © Leon Sorokin) and the script are in this file; it loads nothing.</footer>
<script type="application/json" id="detsim-data">${data}</script>
<script>${lib.js}</script>
<script>${PAGE_SCRIPT}</script>
</body></html>
`;
}
