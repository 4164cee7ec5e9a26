/**
 * Charts rendered on the server as inline SVG: no chart service, no script, no
 * front-end build. Values are bigint (minor units of money, or counts) and every figure shown as text
 * (axis ticks, tooltips, the table fallback) is computed in bigint and formatted by the caller's exact
 * formatter; only the mapping to pixels converts to numbers. Every piece of text goes through `html`,
 * so a label cannot become markup. Each chart carries a `<title>` and `<desc>` (role="img") and a
 * table of the same figures for readers who cannot see it.
 */
import { html, type SafeHtml } from './html.ts';

/** One series: a value (or null: no figure) per category of the chart. */
export interface ChartSeries {
  name: string;
  values: readonly (bigint | null)[];
  /** Fill or stroke colour; default from the palette by position. */
  color?: string;
}

export interface ChartSpec {
  /** Used for the ids of the title and description; anything outside [a-z0-9-] is dropped. */
  id: string;
  title: string;
  /** One or two sentences saying what the chart shows (the SVG's `<desc>`). */
  desc: string;
  /** The categories along the x axis (dates, age buckets...). */
  labels: readonly string[];
  series: readonly ChartSeries[];
  /** Exact text of a value (ticks, tooltips, table): `formatMoney` or a count. */
  format: (value: bigint) => string;
  width?: number;
  height?: number;
}

/** The page's rules for charts and their figures (appended to the page's style sheet, src/web/views.ts). */
export const CHART_CSS = `
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:1rem;margin:.5rem 0 1rem}
figure.chart-figure{margin:0;background:#fff;padding:.5rem;box-shadow:0 1px 2px #0001;min-width:0}
svg.chart{display:block;max-width:100%;height:auto}
figure.chart-figure figcaption{font-weight:600;font-size:.95rem;margin:0 0 .2rem .3rem}
figure.chart-figure details{margin-top:.3rem;font-size:.85rem}
figure.chart-figure summary{cursor:pointer;color:#2456c7}
table.chart-table caption{text-align:left;font-weight:600;padding:.3rem 0}
td.move{font-size:.9rem}td.move .muted{font-size:.75rem;white-space:nowrap}
th.group{text-align:center;border-left:1px solid #d5dae2}
th.num.wrap{white-space:normal;min-width:5.5rem}
#balances tr.book th{background:#1d2a44;color:#fff;text-transform:none;letter-spacing:0;font-size:.9rem}
#balances tbody[data-book=test] tr.book th{background:#6b7483}
#balances tbody[data-book=test] td{color:#46505f}
#balances tr.total th,#balances tr.total td{background:#eef1f5;font-weight:600;border-top:2px solid #b9c0cc}
#balances tr.total th{text-transform:none;letter-spacing:0;font-size:.9rem;color:#1d2430}
`;

/** Colour-blind-safe palette (Okabe-Ito, with blue first). */
export const PALETTE = [
  '#0072b2',
  '#e69f00',
  '#009e73',
  '#cc79a7',
  '#56b4e9',
  '#d55e00',
  '#f0e442',
  '#000000',
];

const FONT = 'system-ui,-apple-system,Segoe UI,Roboto,sans-serif';
/** Rough width of one character of 11px text, to size the left margin to the longest tick label. */
const CHAR_PX = 6.6;

export interface Scale {
  min: bigint;
  max: bigint;
  step: bigint;
  ticks: bigint[];
}

const floorDiv = (a: bigint, b: bigint): bigint => {
  const q = a / b;
  return q * b !== a && a < 0n !== b < 0n ? q - 1n : q;
};
const ceilDiv = (a: bigint, b: bigint): bigint => -floorDiv(-a, b);

/** Smallest and largest of bigints (Math.min and Math.max take numbers only). */
function extent(values: readonly bigint[]): { lo: bigint; hi: bigint } {
  let lo = 0n;
  let hi = 0n;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return { lo, hi };
}

/**
 * A "nice" axis over [lo, hi] that always includes zero: a step of 1, 2 or 5 times a power of ten (in
 * the values' own unit, so exact in bigint) giving at most `maxTicks` intervals, and bounds on that step.
 */
export function niceScale(lo: bigint, hi: bigint, maxTicks = 5): Scale {
  let min = lo < 0n ? lo : 0n;
  let max = hi > 0n ? hi : 0n;
  if (min === max) max = min + 1n;
  const target = BigInt(Math.max(1, Math.floor(maxTicks)));
  const rough = ceilDiv(max - min, target);
  let power = 1n;
  while (power * 10n <= rough) power *= 10n;
  const step = [1n, 2n, 5n, 10n].map((m) => m * power).find((s) => s >= rough) ?? power * 10n;
  min = floorDiv(min, step) * step;
  max = ceilDiv(max, step) * step;
  const ticks: bigint[] = [];
  for (let v = min; v <= max; v += step) ticks.push(v);
  return { min, max, step, ticks };
}

/** Pixel position of a value on a scale mapped to [bottom, top] (y grows downwards). */
function toY(scale: Scale, value: bigint, top: number, bottom: number): number {
  const span = Number(scale.max - scale.min);
  return bottom - (Number(value - scale.min) / span) * (bottom - top);
}

const px = (n: number): string => (Math.round(n * 10) / 10).toString();

function safeId(id: string): string {
  return id.toLowerCase().replace(/[^a-z0-9-]/g, '') || 'chart';
}

const colorOf = (s: ChartSeries, i: number): string => s.color ?? PALETTE[i % PALETTE.length] ?? '#000';

interface Frame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
  scale: Scale;
  slot: number;
  /** Top-left corner of each series' legend entry (wrapped onto rows that fit the width). */
  legend: { x: number; y: number }[];
}

function frame(spec: ChartSpec, lo: bigint, hi: bigint): Frame {
  const width = spec.width ?? 600;
  const height = spec.height ?? 260;
  const scale = niceScale(lo, hi);
  const longest = Math.max(...scale.ticks.map((t) => spec.format(t).length));
  const left = Math.ceil(12 + longest * CHAR_PX);
  const right = width - 12;
  const legend: { x: number; y: number }[] = [];
  let lx = 12;
  let ly = 8;
  for (const s of spec.series) {
    const w = 18 + s.name.length * CHAR_PX + 14;
    if (lx > 12 && lx + w > right) {
      lx = 12;
      ly += 16;
    }
    legend.push({ x: lx, y: ly });
    lx += w;
  }
  const top = ly + 26;
  const bottom = height - 28;
  const slot = (right - left) / Math.max(1, spec.labels.length);
  return { width, height, left, right, top, bottom, scale, slot, legend };
}

/** Title, description, legend, grid lines with tick labels, and x labels (thinned from the last, the latest, so they do not overlap). */
function axes(spec: ChartSpec, f: Frame, id: string): SafeHtml {
  const every = Math.max(
    1,
    Math.ceil((Math.max(...spec.labels.map((l) => l.length), 1) * CHAR_PX + 8) / f.slot),
  );
  const legend = spec.series.map((s, i) => {
    const at = f.legend[i] ?? { x: 12, y: 8 };
    return html`<g class="legend"><rect x="${px(at.x)}" y="${at.y}" width="12" height="12" fill="${colorOf(s, i)}"/><text x="${px(at.x + 16)}" y="${at.y + 10}">${s.name}</text></g>`;
  });
  return html`<title id="${id}-title">${spec.title}</title><desc id="${id}-desc">${spec.desc}</desc>
${legend}
${f.scale.ticks.map((t) => {
  const y = px(toY(f.scale, t, f.top, f.bottom));
  return html`<line x1="${f.left}" x2="${f.right}" y1="${y}" y2="${y}" stroke="${t === 0n ? '#46505f' : '#e3e6eb'}"/><text class="tick" x="${f.left - 6}" y="${y}" dy="4" text-anchor="end">${spec.format(t)}</text>`;
})}
${spec.labels.map((l, i) =>
  (spec.labels.length - 1 - i) % every === 0
    ? html`<text class="xlabel" x="${px(f.left + f.slot * (i + 0.5))}" y="${f.bottom + 16}" text-anchor="middle">${l}</text>`
    : '',
)}`;
}

function svgOpen(f: Frame, id: string, kind: string, body: SafeHtml): SafeHtml {
  return html`<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="${kind}" id="${id}" role="img" aria-labelledby="${id}-title ${id}-desc" width="${f.width}" height="${f.height}" viewBox="0 0 ${f.width} ${f.height}" font-family="${FONT}" font-size="11" fill="#1d2430">
<rect x="0" y="0" width="${f.width}" height="${f.height}" fill="#ffffff"/>
${body}</svg>`;
}

const isEmpty = (spec: ChartSpec): boolean =>
  spec.labels.length === 0 || spec.series.every((s) => s.values.every((v) => v === null));

function emptyChart(spec: ChartSpec, kind: string): SafeHtml {
  const id = safeId(spec.id);
  const f = frame({ ...spec, series: [] }, 0n, 0n);
  return svgOpen(
    f,
    id,
    kind,
    html`<title id="${id}-title">${spec.title}</title><desc id="${id}-desc">${spec.desc} No figures for this period.</desc>
<text class="empty" x="${f.width / 2}" y="${f.height / 2}" text-anchor="middle" fill="#6b7483" font-size="13">No figures for this period</text>`,
  );
}

/** Lines over the categories, one per series; a null value breaks the line. Points carry exact tooltips. */
export function lineChart(spec: ChartSpec): SafeHtml {
  if (isEmpty(spec)) return emptyChart(spec, 'line');
  const values = spec.series.flatMap((s) => s.values.filter((v): v is bigint => v !== null));
  const { lo, hi } = extent(values);
  const f = frame(spec, lo, hi);
  const id = safeId(spec.id);
  const lines = spec.series.map((s, si) => {
    const color = colorOf(s, si);
    const points = s.values.map((v, i) =>
      v === null ? null : { x: f.left + f.slot * (i + 0.5), y: toY(f.scale, v, f.top, f.bottom), v, i },
    );
    let d = '';
    let pen = false;
    for (const p of points) {
      if (!p) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${px(p.x)} ${px(p.y)}`;
      pen = true;
    }
    return html`<g class="series" data-series="${s.name}"><path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>${points.map(
      (p) =>
        p
          ? html`<circle cx="${px(p.x)}" cy="${px(p.y)}" r="3" fill="${color}"><title>${s.name}, ${spec.labels[p.i] ?? ''}: ${spec.format(p.v)}</title></circle>`
          : '',
    )}</g>`;
  });
  return svgOpen(f, id, 'line', html`${axes(spec, f, id)}${lines}`);
}

/**
 * Stacked bars, one bar per category and one segment per series: positive values stack up from zero,
 * negative ones down from it, so the scale covers both sums.
 */
export function stackedBarChart(spec: ChartSpec): SafeHtml {
  if (isEmpty(spec)) return emptyChart(spec, 'bar');
  const sums = spec.labels.map((_, i) => {
    let pos = 0n;
    let neg = 0n;
    for (const s of spec.series) {
      const v = s.values[i] ?? 0n;
      if (v > 0n) pos += v;
      else neg += v;
    }
    return { pos, neg };
  });
  const f = frame(spec, extent(sums.map((s) => s.neg)).lo, extent(sums.map((s) => s.pos)).hi);
  const id = safeId(spec.id);
  const barWidth = Math.max(2, Math.min(48, f.slot * 0.7));
  const bars = spec.labels.map((label, i) => {
    let up = 0n;
    let down = 0n;
    const x = f.left + f.slot * (i + 0.5) - barWidth / 2;
    return spec.series.map((s, si) => {
      const v = s.values[i] ?? 0n;
      if (v === 0n) return '';
      const from = v > 0n ? up : down;
      const to = from + v;
      if (v > 0n) up = to;
      else down = to;
      const y1 = toY(f.scale, from, f.top, f.bottom);
      const y2 = toY(f.scale, to, f.top, f.bottom);
      return html`<rect data-series="${s.name}" data-label="${label}" x="${px(x)}" y="${px(Math.min(y1, y2))}" width="${px(barWidth)}" height="${px(Math.max(0.5, Math.abs(y2 - y1)))}" fill="${colorOf(s, si)}"><title>${s.name}, ${label}: ${spec.format(v)}</title></rect>`;
    });
  });
  return svgOpen(f, id, 'bar', html`${axes(spec, f, id)}<g class="bars">${bars}</g>`);
}

/**
 * The chart's figures as a table (the fallback for screen readers and for copying exact figures):
 * one row per category, one column per series, and a total column when `total` is set.
 */
export function chartTable(spec: ChartSpec, options: { total?: boolean; caption?: string } = {}): SafeHtml {
  const rows = spec.labels
    .map((label, i) => ({ label, values: spec.series.map((s) => s.values[i] ?? null) }))
    .filter((r) => r.values.some((v) => v !== null));
  const cell = (v: bigint | null) =>
    html`<td class="num${v !== null && v < 0n ? ' neg' : ''}">${v === null ? '' : spec.format(v)}</td>`;
  return html`<table class="narrow chart-table" data-chart-table="${safeId(spec.id)}"><caption>${options.caption ?? spec.title}</caption>
<thead><tr><th></th>${spec.series.map((s) => html`<th class="num">${s.name}</th>`)}${options.total ? html`<th class="num">Total</th>` : ''}</tr></thead>
<tbody>${
    rows.length
      ? rows.map(
          (r) =>
            html`<tr><th scope="row">${r.label}</th>${r.values.map(cell)}${
              options.total ? cell(r.values.reduce<bigint>((a, v) => a + (v ?? 0n), 0n)) : ''
            }</tr>`,
        )
      : html`<tr><td colspan="${spec.series.length + 1 + (options.total ? 1 : 0)}" class="muted">No figures.</td></tr>`
  }</tbody></table>`;
}

/** A chart under its visible title, with its table behind a disclosure: what the page puts in a figure. */
export function chartFigure(chart: SafeHtml, spec: ChartSpec, options: { total?: boolean } = {}): SafeHtml {
  return html`<figure class="chart-figure"><figcaption>${spec.title}</figcaption>${chart}<details><summary>Figures as a table</summary>${chartTable(spec, options)}</details></figure>`;
}
