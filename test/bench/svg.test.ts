// The bench SVG writer (bench/lib/svg.ts): axis ticks cover the data with round steps, text is
// escaped, and each chart is one complete SVG document with every series and row in it.
import { describe, expect, it } from 'vitest';
import { barChart, esc, lineChart, ticks } from '../../bench/lib/svg.js';

describe('ticks', () => {
  it('start at 0, step by 1, 2 or 5 × 10^k, and reach the maximum', () => {
    for (const max of [0.37, 1, 7, 42, 999, 31_285, 1_000_000]) {
      const t = ticks(max);
      expect(t[0]).toBe(0);
      expect(t.at(-1)!).toBeGreaterThanOrEqual(max);
      const step = t[1]! - t[0]!;
      const mant = step / 10 ** Math.floor(Math.log10(step));
      expect(
        [1, 2, 5, 10].some((m) => Math.abs(mant - m) < 1e-9),
        `${max}: step ${step}`,
      ).toBe(true);
      expect(t.length).toBeLessThanOrEqual(12);
    }
  });
});

it('esc escapes the XML metacharacters', () => {
  expect(esc('a<b & "c">')).toBe('a&lt;b &amp; &quot;c&quot;&gt;');
});

it('lineChart draws one polyline per series and a legend entry with the escaped name', () => {
  const svg = lineChart({
    title: 'T',
    xLabel: 'x',
    yLabel: 'y',
    series: [
      {
        name: 'a<1>',
        points: [
          [1, 2],
          [4, 8],
        ],
      },
      { name: 'b', points: [[1, 3]], dashed: true },
    ],
  });
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  expect(svg.match(/<polyline /g)).toHaveLength(2);
  expect(svg).toContain('>a&lt;1&gt;</text>');
  expect(svg).toContain('stroke-dasharray="6 4"');
});

it('barChart draws a bar per row with a value, text for every row, and the reference line', () => {
  const svg = barChart({
    title: 'T',
    xLabel: 'ratio',
    barLegend: 'L',
    reference: { value: 1, label: '1×' },
    rows: [
      { label: 'r1', value: 0.5, text: '0.50×' },
      { label: 'r2', value: null, text: 'no limit' },
    ],
  });
  // Bars are the rects with a height of rowH - 10 (the legend swatch is 10 high).
  expect(svg.match(/<rect x="380" y="\d+(\.\d+)?" width="[0-9.]+" height="16"/g)).toHaveLength(1);
  expect(svg).toContain('>0.50×</text>');
  expect(svg).toContain('>no limit</text>');
  expect(svg).toContain('stroke-dasharray="5 3"');
});
