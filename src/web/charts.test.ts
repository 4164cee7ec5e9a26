import { describe, expect, it } from 'vitest';
import { type ChartSpec, chartFigure, chartTable, lineChart, niceScale, stackedBarChart } from './charts.ts';
import { formatMoney } from './html.ts';

const count = (v: bigint) => v.toString();

function spec(over: Partial<ChartSpec>): ChartSpec {
  return {
    id: 'c1',
    title: 'Title',
    desc: 'Desc.',
    labels: ['a', 'b', 'c'],
    series: [{ name: 's', values: [1n, 2n, 3n] }],
    format: count,
    ...over,
  };
}

/** Every number of an attribute in the markup (coordinates, sizes). */
const numbersOf = (svg: string, attr: string): number[] =>
  [...svg.matchAll(new RegExp(`\\s${attr}="(-?[\\d.]+)"`, 'g'))].map((m) => Number(m[1]));

describe('niceScale', () => {
  it.each([
    [0n, 7n, 5, { min: 0n, max: 8n, step: 2n }],
    [0n, 100n, 5, { min: 0n, max: 100n, step: 20n }],
    [0n, 101n, 5, { min: 0n, max: 150n, step: 50n }],
    [3n, 3n, 5, { min: 0n, max: 3n, step: 1n }],
    [0n, 0n, 5, { min: 0n, max: 1n, step: 1n }],
    [-7n, 0n, 5, { min: -8n, max: 0n, step: 2n }],
    [-30n, 45n, 5, { min: -40n, max: 60n, step: 20n }],
    [-123_456n, -1n, 4, { min: -150_000n, max: 0n, step: 50_000n }],
    // 18 integer digits and two decimals: exact in bigint, no float on the way.
    [
      0n,
      123_456_789_012_345_678_91n,
      5,
      { min: 0n, max: 150_000_000_000_000_000_00n, step: 50_000_000_000_000_000_00n },
    ],
  ])('[%s, %s] in %s ticks', (lo, hi, n, want) => {
    const s = niceScale(lo, hi, n);
    expect({ min: s.min, max: s.max, step: s.step }).toEqual(want);
    expect(s.ticks[0]).toBe(s.min);
    expect(s.ticks.at(-1)).toBe(s.max);
    expect(s.ticks.length - 1).toBeLessThanOrEqual(n);
    expect(s.ticks).toContain(0n);
  });
});

describe('lineChart', () => {
  it('is an accessible SVG with a title, a description and exact tick labels', () => {
    const svg = lineChart(
      spec({
        series: [{ name: 'available', values: [10_000n, -2_550n, 123_456_789_012_345_678_91n] }],
        format: formatMoney,
      }),
    ).value;
    expect(svg).toMatch(/^<svg [^>]*role="img" aria-labelledby="c1-title c1-desc"/);
    expect(svg).toContain('<title id="c1-title">Title</title><desc id="c1-desc">Desc.</desc>');
    // Ticks are exact money text; the huge value's tooltip is exact too.
    expect(svg).toContain('>150,000,000,000,000,000.00</text>');
    expect(svg).toContain('>-50,000,000,000,000,000.00</text>');
    expect(svg).toContain('<title>available, c: 123,456,789,012,345,678.91</title>');
    expect(svg).toContain('<title>available, b: -25.50</title>');
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  });

  it('puts higher values higher, zero on its line, and negatives below it', () => {
    const svg = lineChart(spec({ series: [{ name: 's', values: [-5n, 0n, 10n] }] })).value;
    const [neg, zero, pos] = numbersOf(svg, 'cy');
    expect(pos).toBeLessThan(zero!);
    expect(zero).toBeLessThan(neg!);
    const zeroLine = /<line [^>]*y1="([\d.]+)"[^>]*stroke="#46505f"/.exec(svg);
    expect(Number(zeroLine?.[1])).toBe(zero);
    // x grows with the category.
    const xs = numbersOf(svg, 'cx');
    expect([...xs].sort((a, b) => a - b)).toEqual(xs);
  });

  it('draws one point for one figure, and breaks the line at a missing figure', () => {
    const one = lineChart(spec({ labels: ['2026-11-01'], series: [{ name: 's', values: [42n] }] })).value;
    expect(one.match(/<circle /g)).toHaveLength(1);
    expect(one).toContain('<title>s, 2026-11-01: 42</title>');
    expect(one).not.toMatch(/NaN/);
    const gap = lineChart(spec({ series: [{ name: 's', values: [1n, null, 3n] }] })).value;
    expect(gap.match(/<circle /g)).toHaveLength(2);
    const d = /<path d="([^"]+)"/.exec(gap)?.[1] ?? '';
    expect(d.match(/M/g)).toHaveLength(2);
    expect(d).not.toContain('L');
  });

  it('says there are no figures when there are none', () => {
    for (const empty of [
      spec({ labels: [] }),
      spec({ series: [{ name: 's', values: [null, null, null] }] }),
    ]) {
      const svg = lineChart(empty).value;
      expect(svg).toContain('No figures for this period');
      expect(svg).toContain('<title id="c1-title">Title</title>');
      expect(svg).not.toMatch(/<circle|<path|NaN/);
    }
  });

  it('escapes every text: title, description, series names, labels, and the id', () => {
    const evil = '<script>alert("x")</script>&';
    const svg = lineChart(
      spec({ id: 'a"><b', title: evil, desc: evil, labels: [evil], series: [{ name: evil, values: [1n] }] }),
    ).value;
    expect(svg).not.toContain('<script>');
    expect(svg).not.toContain('"><b');
    expect(svg).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;');
    expect(svg).toContain('id="ab"');
  });
});

describe('stackedBarChart', () => {
  it('stacks positive segments upwards and negative ones downwards from zero', () => {
    const svg = stackedBarChart(
      spec({
        labels: ['d1'],
        series: [
          { name: 'in', values: [30n] },
          { name: 'more', values: [10n] },
          { name: 'out', values: [-20n] },
        ],
      }),
    ).value;
    const rect = (name: string) => {
      const m = new RegExp(`<rect data-series="${name}"[^>]*y="([\\d.]+)"[^>]*height="([\\d.]+)"`).exec(svg);
      return { y: Number(m?.[1]), h: Number(m?.[2]) };
    };
    const inn = rect('in');
    const more = rect('more');
    const out = rect('out');
    // Scale -20..40 (step 20): 30 is three times as tall as 10, -20 twice.
    expect(inn.h / more.h).toBeCloseTo(3, 1);
    expect(out.h / more.h).toBeCloseTo(2, 1);
    expect(more.y + more.h).toBeCloseTo(inn.y, 1);
    expect(out.y).toBeCloseTo(inn.y + inn.h, 1);
    expect(svg).toContain('<title>out, d1: -20</title>');
  });

  it('skips zero segments and treats a missing figure as none', () => {
    const svg = stackedBarChart(
      spec({
        labels: ['a', 'b'],
        series: [
          { name: 's', values: [0n, null] },
          { name: 't', values: [5n, 2n] },
        ],
      }),
    ).value;
    expect(svg.match(/<rect data-series=/g)).toHaveLength(2);
    expect(stackedBarChart(spec({ labels: [] })).value).toContain('No figures for this period');
  });
});

describe('chartTable', () => {
  it('lists the exact figures, a total per row when asked, and skips rows with no figure', () => {
    const table = chartTable(
      spec({
        labels: ['x', 'y', '<z>'],
        series: [
          { name: 'a', values: [150n, null, -1n] },
          { name: 'b', values: [5n, null, null] },
        ],
        format: formatMoney,
      }),
      { total: true },
    ).value;
    expect(table).toContain(
      '<tr><th scope="row">x</th><td class="num">1.50</td><td class="num">0.05</td><td class="num">1.55</td></tr>',
    );
    expect(table).not.toContain('>y<');
    expect(table).toContain(
      '<th scope="row">&lt;z&gt;</th><td class="num neg">-0.01</td><td class="num"></td>',
    );
    expect(chartFigure(lineChart(spec({})), spec({})).value).toMatch(
      /^<figure class="chart-figure"><figcaption>Title<\/figcaption><svg[\s\S]*<details><summary>/,
    );
  });
});

describe('x labels', () => {
  it('thins the labels so they do not overlap, and keeps them at least a label apart', () => {
    const labels = Array.from({ length: 31 }, (_, i) => `11-${String(i + 1).padStart(2, '0')}`);
    const shown = (n: number) => {
      const some = labels.slice(0, n);
      const svg = lineChart(
        spec({ labels: some, series: [{ name: 's', values: some.map(() => 1n) }] }),
      ).value;
      return [...svg.matchAll(/<text class="xlabel" x="([\d.]+)"[^>]*>([^<]+)<\/text>/g)].map((m) => ({
        x: Number(m[1]),
        text: m[2],
      }));
    };
    for (const n of [7, 30, 31]) {
      const some = shown(n);
      expect(some.at(-1)?.text).toBe(labels[n - 1]);
      // 5 characters of about 6.6 px each and a gap: centres at least 41 px apart.
      for (let i = 1; i < some.length; i++) expect(some[i]!.x - some[i - 1]!.x).toBeGreaterThanOrEqual(41);
    }
    expect(shown(31).length).toBeLessThan(31);
    expect(shown(2).map((l) => l.text)).toEqual(['11-01', '11-02']);
  });
});
