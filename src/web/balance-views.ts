/**
 * The balances page: each balance with today's and this month's movements beside it and
 * the movements by effect; and its charts page (`/balances/charts`, off the balances page's path: the
 * volumes read 30 to 90 days of mirrors), charts that answer at a glance (available and reserved over time, daily
 * volumes by kind and status, open exceptions by age). Routes in src/web/balance-routes.ts; the SVG
 * renderer in src/web/charts.ts; the layout in views.ts.
 */
import type { AgeBucketRow, BalanceMovementRow, BalancePoint, VolumeRow } from '../db/read-models/charts.ts';
import { NO_STATUS } from '../db/read-models/charts.ts';
import type { ProviderBalanceCheckRow } from '../db/read-models/settlements.ts';
import { AGE_BUCKETS } from '../domain/exception-queue.ts';
import type { Minor } from '../domain/money.ts';
import { ENTITY_KINDS, type EntityKind } from '../domain/statuses.ts';
import { type ChartSeries, type ChartSpec, chartFigure, lineChart, stackedBarChart } from './charts.ts';
import { formatDateTime, formatMoney, html, raw, type SafeHtml } from './html.ts';
import { layout, type PageContext } from './views.ts';

export interface BalanceView {
  account: string;
  currency: string;
  book: string;
  available: Minor;
  reserved: Minor;
  inFlightCashouts: number;
  inFlightRefunds: number;
}

/**
 * The cash leg of one merchant account and currency (live book): settlements paid out and not yet in the
 * bank, settlement fees, the currency's conversion account, each bank account and the bank's fees.
 */
export interface CashLegView {
  account: string;
  currency: string;
  inTransit: Minor;
  settlementFees: Minor;
  fxConversion: Minor;
  /** Each bank account (its id as statements name it) holding this currency. */
  banks: readonly { id: string; balance: Minor }[];
  bankFees: Minor;
}

/** What the balances page shows, read by the route (src/web/balance-routes.ts). */
export interface BalancesPageData {
  at: Date;
  balances: readonly BalanceView[];
  /** The cash leg's balances (none before a settlement is booked). */
  cashLeg?: readonly CashLegView[];
  /** The latest check of the provider's balance per account and currency (none before a settlement report gives one). */
  providerBalances?: readonly ProviderBalanceCheckRow[];
  /** Postings in and out of each balance account since the month's and today's local midnight. */
  movements: readonly BalanceMovementRow[];
}

/** What the charts page shows, read by the route (src/web/balance-routes.ts). */
export interface BalanceChartsData {
  at: Date;
  /** The balances now: each live one's chart ends with it. */
  balances: readonly BalanceView[];
  /** Daily snapshots over the chart's days (UTC midnights). */
  history: readonly BalancePoint[];
  /** UTC midnights of the balance chart, oldest first (the current balance follows as "now"). */
  historyDays: readonly Date[];
  volumes: readonly VolumeRow[];
  /** Local dates of the volume charts, oldest first. */
  volumeDays: readonly string[];
  /** The currency whose amounts the volume charts show, and the others to choose from. */
  currency: string | null;
  currencies: readonly string[];
  days: number;
  exceptionAges: readonly AgeBucketRow[];
}

/** The chart periods offered (days back, today included). */
export const CHART_DAYS = [7, 30, 90] as const;

const KIND_LABEL: Record<EntityKind, string> = {
  deposit: 'Deposits',
  cashout: 'Cashouts',
  refund: 'Refunds',
};

/**
 * Volume segments: each final status its own (in the order people read an outcome), the statuses still
 * moving together as "in progress", and entities awaiting the provider's first status (known from the
 * merchant's intent only).
 */
const STATUS_GROUPS: readonly { name: string; color: string; statuses: readonly string[] | null }[] = [
  { name: 'completed', color: '#009e73', statuses: ['COMPLETED'] },
  { name: 'early released', color: '#56b4e9', statuses: ['EARLY_RELEASED'] },
  { name: 'in progress', color: '#0072b2', statuses: null },
  { name: 'cancelled', color: '#999999', statuses: ['CANCELLED'] },
  { name: 'expired', color: '#e69f00', statuses: ['EXPIRED'] },
  { name: 'declined', color: '#6b4e00', statuses: ['DECLINED'] },
  { name: 'rejected', color: '#d55e00', statuses: ['REJECTED'] },
  { name: 'awaiting status', color: '#cc79a7', statuses: [NO_STATUS] },
];

function statusGroup(status: string): string {
  const group = STATUS_GROUPS.find((g) => g.statuses?.includes(status)) ?? STATUS_GROUPS[2];
  return group?.name ?? 'in progress';
}

const SEVERITY_COLORS: Record<string, string> = {
  critical: '#b3261e',
  high: '#d55e00',
  medium: '#e69f00',
  low: '#56b4e9',
  info: '#999999',
};

const count = (v: bigint): string => v.toLocaleString('en-US');

/** A signed amount: `+1,234.00`, `-56.78`, `0.00`. */
const signed = (v: Minor): string => (v > 0n ? `+${formatMoney(v)}` : formatMoney(v));

interface Flow {
  in: Minor;
  out: Minor;
}
const emptyFlow = (): Flow => ({ in: 0n, out: 0n });

/** A movement cell: the net with a sign, and what went in and out beneath it. */
function flowCell(flow: Flow, label: string): SafeHtml {
  const net = flow.in + flow.out;
  return html`<td class="num move${net < 0n ? ' neg' : ''}" aria-label="${label}: net ${signed(net)}, in ${formatMoney(flow.in)}, out ${formatMoney(-flow.out)}">${signed(net)}<div class="muted">in ${formatMoney(flow.in)}</div><div class="muted">out ${formatMoney(-flow.out)}</div></td>`;
}

function balanceCell(minor: Minor): SafeHtml {
  return html`<td class="num${minor < 0n ? ' neg' : ''}">${formatMoney(minor)}</td>`;
}

const balanceKey = (account: string, currency: string, book: string) => `${account}|${currency}|${book}`;

/** Which side of a balance a ledger account is (available or reserved), whatever the book. */
const side = (account: string): 'available' | 'reserved' =>
  account.endsWith('reserved') ? 'reserved' : 'available';

function flows(movements: readonly BalanceMovementRow[]) {
  const map = new Map<
    string,
    { available: { today: Flow; month: Flow }; reserved: { today: Flow; month: Flow } }
  >();
  for (const m of movements) {
    const key = balanceKey(m.merchantAccount, m.currency, m.book);
    let f = map.get(key);
    if (!f) {
      f = {
        available: { today: emptyFlow(), month: emptyFlow() },
        reserved: { today: emptyFlow(), month: emptyFlow() },
      };
      map.set(key, f);
    }
    const s = f[side(m.account)];
    s.today.in += m.todayIn;
    s.today.out += m.todayOut;
    s.month.in += m.monthIn;
    s.month.out += m.monthOut;
  }
  return map;
}

/** The books in the order the page shows them: the real money first. */
const BOOK_ORDER = ['live', 'test'];
const bookRank = (book: string) => {
  const i = BOOK_ORDER.indexOf(book);
  return i < 0 ? BOOK_ORDER.length : i;
};
const BOOK_TITLE: Record<string, string> = { live: 'Live book', test: 'Test book (no real money)' };

/**
 * The balances grouped by book (live, then test), then currency, then account, each book and currency
 * with its total when it has several accounts: amounts add up only within one currency, and a single
 * account's row is its own total.
 */
function groupBalances(balances: readonly BalanceView[]) {
  const sorted = [...balances].sort(
    (a, b) =>
      bookRank(a.book) - bookRank(b.book) ||
      a.book.localeCompare(b.book) ||
      a.currency.localeCompare(b.currency) ||
      a.account.localeCompare(b.account),
  );
  const books: { book: string; currencies: { currency: string; rows: BalanceView[] }[] }[] = [];
  for (const b of sorted) {
    let book = books[books.length - 1];
    if (book?.book !== b.book) {
      book = { book: b.book, currencies: [] };
      books.push(book);
    }
    let cur = book.currencies[book.currencies.length - 1];
    if (cur?.currency !== b.currency) {
      cur = { currency: b.currency, rows: [] };
      book.currencies.push(cur);
    }
    cur.rows.push(b);
  }
  return books;
}

const addFlow = (a: Flow, b: Flow | undefined): Flow => ({
  in: a.in + (b?.in ?? 0n),
  out: a.out + (b?.out ?? 0n),
});

function balancesTable(ctx: PageContext, data: BalancesPageData): SafeHtml {
  const byBalance = flows(data.movements);
  const flowOf = (b: BalanceView) => byBalance.get(balanceKey(b.account, b.currency, b.book));
  const cells = (
    name: string,
    available: Minor,
    reserved: Minor,
    f: { available: { today: Flow; month: Flow }; reserved: { today: Flow; month: Flow } } | undefined,
    cashouts: number,
    refunds: number,
  ) =>
    html`${balanceCell(available)}${flowCell(f?.available.today ?? emptyFlow(), `${name} available today`)}${flowCell(f?.available.month ?? emptyFlow(), `${name} available this month`)}${balanceCell(reserved)}${flowCell(f?.reserved.today ?? emptyFlow(), `${name} reserved today`)}${flowCell(f?.reserved.month ?? emptyFlow(), `${name} reserved this month`)}<td class="num">${cashouts}</td><td class="num">${refunds}</td>`;
  const books = groupBalances(data.balances);
  return html`<table id="balances"><thead>
<tr><th rowspan="2">Account</th><th rowspan="2">Currency</th><th rowspan="2">Book</th><th colspan="3" class="group">Available (amount)</th><th colspan="3" class="group">Reserved (amount)</th><th colspan="2" class="group">In flight (count)</th></tr>
<tr><th class="num">Balance</th><th class="num">Today</th><th class="num">This month</th><th class="num">Balance</th><th class="num">Today</th><th class="num">This month</th><th class="num">Cashouts</th><th class="num">Refunds</th></tr></thead>
${
  books.length
    ? books.map(
        (book) =>
          html`<tbody data-book="${book.book}"><tr class="book"><th colspan="11" scope="rowgroup">${BOOK_TITLE[book.book] ?? `${book.book} book`}</th></tr>${book.currencies.map(
            (cur) => {
              const rows = cur.rows.map((b) => {
                const name = `${b.account} ${b.currency} ${b.book}`;
                return html`<tr data-balance="${balanceKey(b.account, b.currency, b.book)}"><td>${b.account}</td><td>${b.currency}</td><td>${b.book}</td>${cells(name, b.available, b.reserved, flowOf(b), b.inFlightCashouts, b.inFlightRefunds)}</tr>`;
              });
              if (cur.rows.length < 2) return rows;
              const sum = (pick: (b: BalanceView) => Minor) => cur.rows.reduce((t, b) => t + pick(b), 0n);
              const total = cur.rows.reduce(
                (t, b) => {
                  const f = flowOf(b);
                  return {
                    available: {
                      today: addFlow(t.available.today, f?.available.today),
                      month: addFlow(t.available.month, f?.available.month),
                    },
                    reserved: {
                      today: addFlow(t.reserved.today, f?.reserved.today),
                      month: addFlow(t.reserved.month, f?.reserved.month),
                    },
                  };
                },
                {
                  available: { today: emptyFlow(), month: emptyFlow() },
                  reserved: { today: emptyFlow(), month: emptyFlow() },
                },
              );
              const name = `total ${cur.currency} ${book.book}`;
              return html`${rows}<tr class="total" data-total="${cur.currency}|${book.book}"><th colspan="3" scope="row">Total ${cur.currency}, ${book.book} (${cur.rows.length} accounts)</th>${cells(
                name,
                sum((b) => b.available),
                sum((b) => b.reserved),
                total,
                cur.rows.reduce((n, b) => n + b.inFlightCashouts, 0),
                cur.rows.reduce((n, b) => n + b.inFlightRefunds, 0),
              )}</tr>`;
            },
          )}</tbody>`,
      )
    : html`<tbody><tr><td colspan="11" class="muted">No balances yet.</td></tr></tbody>`
}</table>
<p class="muted">Live rows first, then the test book; within a book by currency, with a total per currency where several accounts hold it (amounts in different currencies are never added). Today and this month run from local midnight in ${ctx.timeZone}; each shows the net change, and beneath it what went in and out. In flight counts the cashouts and refunds not yet final.</p>`;
}

/** The cash leg: where the provider's settlements are between `available` and the bank account. */
function cashLegTable(data: BalancesPageData): SafeHtml {
  const rows = data.cashLeg ?? [];
  if (rows.length === 0) return html``;
  return html`<h2>Settlements and bank</h2>
<table id="cash-leg"><thead><tr><th>Account</th><th>Currency</th><th class="num">Settlements in transit</th><th class="num">Settlement fees</th><th class="num">FX conversion</th><th class="num">Bank</th><th class="num">Bank fees</th></tr></thead><tbody>${rows.map(
    (r) =>
      html`<tr data-cash-leg="${r.account}|${r.currency}"><td>${r.account}</td><td>${r.currency}</td>${balanceCell(r.inTransit)}${balanceCell(r.settlementFees)}${balanceCell(r.fxConversion)}<td class="num${r.banks.some((b) => b.balance < 0n) ? ' neg' : ''}">${
        r.banks.length
          ? r.banks.map(
              (b) =>
                html`<div data-bank="${b.id}">${formatMoney(b.balance)} <span class="muted">${b.id}</span></div>`,
            )
          : formatMoney(0n)
      }</td>${balanceCell(r.bankFees)}</tr>`,
  )}</tbody></table>
<p class="muted">Live book. A settlement the provider reported moves its gross out of available: its net into settlements in transit and its fee into settlement fees (a converted settlement through FX conversion, which holds the source currency's gross and, negated, the amount converted). A bank credit matched to settlements moves their nets from in transit to the bank account; what the bank kept is in bank fees.</p>`;
}

/** The provider's balance at its latest cut-off against the ledger's available then, per account and currency. */
function providerBalanceTable(ctx: PageContext, data: BalancesPageData): SafeHtml {
  const rows = data.providerBalances ?? [];
  if (rows.length === 0) return html``;
  return html`<h2>The provider's balance</h2>
<table id="provider-balances"><thead><tr><th>Account</th><th>Currency</th><th>Cut-off</th><th>Settlement</th><th class="num">Provider</th><th class="num">Ledger</th><th class="num">Difference</th><th>Checked</th></tr></thead><tbody>${rows.map(
    (r) =>
      html`<tr data-provider-balance="${r.merchantAccount}|${r.currency}"><td>${r.merchantAccount}</td><td>${r.currency}</td><td>${formatDateTime(r.cutoff, ctx.timeZone)}</td><td>${r.settlementId}</td>${balanceCell(r.provider)}${balanceCell(r.ledger)}${balanceCell(r.provider - r.ledger)}<td>${formatDateTime(r.checkedAt, ctx.timeZone)}${
        r.differsSince === null
          ? html`<div class="muted">agrees</div>`
          : html`<div class="neg">differs since ${formatDateTime(r.differsSince, ctx.timeZone)}</div>`
      }</td></tr>`,
  )}</tbody></table>
<p class="muted">As the last matching run checked it: the balance the provider's settlement report gives at the latest cut-off its transactions report reaches, against the ledger's available at that cut-off, dated by the provider's own times. A difference that lasts <code>PAYRECON_MATCH_LEDGER_WAIT_SECONDS</code> raises <a href="${ctx.base}/exceptions?type=PROVIDER_BALANCE_DRIFT">PROVIDER_BALANCE_DRIFT</a>; a shorter one is the ledger reading a move late.</p>`;
}

/** The movements behind the table, by effect (a reversal on its own line). */
function movementsTable(data: BalancesPageData): SafeHtml {
  const net = (a: Minor, b: Minor) => a + b;
  return html`<details id="movements-by-effect"><summary>Movements by effect</summary>
<table><thead><tr><th>Account</th><th>Currency</th><th>Book</th><th>Balance</th><th>Effect</th><th class="num">Today</th><th class="num">This month</th></tr></thead><tbody>${
    data.movements.length
      ? data.movements.map(
          (m) =>
            html`<tr><td>${m.merchantAccount}</td><td>${m.currency}</td><td>${m.book}</td><td>${side(m.account)}</td><td>${m.effect}${m.direction < 0 ? ' (reversal)' : ''}</td><td class="num">${signed(net(m.todayIn, m.todayOut))}</td><td class="num">${signed(net(m.monthIn, m.monthOut))}</td></tr>`,
        )
      : html`<tr><td colspan="7" class="muted">Nothing moved this month.</td></tr>`
  }</tbody></table></details>`;
}

const shortDate = (iso: string): string => iso.slice(5);

/** One line chart per live balance: available and reserved at each UTC midnight, then now. */
function balanceCharts(data: BalanceChartsData): SafeHtml[] {
  const labels = [...data.historyDays.map((d) => shortDate(d.toISOString().slice(0, 10))), 'now'];
  const index = new Map(data.historyDays.map((d, i) => [d.getTime(), i]));
  return data.balances
    .filter((b) => b.book === 'live')
    .map((b) => {
      const values = {
        available: labels.map((): bigint | null => null),
        reserved: labels.map((): bigint | null => null),
      };
      for (const p of data.history) {
        if (p.merchantAccount !== b.account || p.currency !== b.currency || p.book !== b.book) continue;
        const i = index.get(p.at.getTime());
        if (i !== undefined) values[side(p.account)][i] = p.balance;
      }
      values.available[labels.length - 1] = b.available;
      values.reserved[labels.length - 1] = b.reserved;
      const spec: ChartSpec = {
        id: `balance-${b.account}-${b.currency}`,
        title: `${b.account} ${b.currency}: available and reserved`,
        desc: `Balances at 00:00 UTC on each of the last ${data.days} days, then now. A day without a point has no snapshot yet.`,
        labels,
        series: [
          { name: 'available', values: values.available, color: '#0072b2' },
          { name: 'reserved', values: values.reserved, color: '#e69f00' },
        ],
        format: formatMoney,
        width: 600,
      };
      return chartFigure(lineChart(spec), spec);
    });
}

/** Per kind: a count chart (all currencies) and an amount chart (the chosen currency), stacked by status. */
function volumeCharts(data: BalanceChartsData): SafeHtml[] {
  const live = data.volumes.filter((v) => !v.test);
  const dayIndex = new Map(data.volumeDays.map((d, i) => [d, i]));
  const labels = data.volumeDays.map(shortDate);
  return ENTITY_KINDS.flatMap((kind) => {
    const series = (pick: (v: VolumeRow) => bigint | null): ChartSeries[] =>
      STATUS_GROUPS.map((g) => {
        const values = labels.map((): bigint | null => null);
        for (const v of live) {
          if (v.kind !== kind || statusGroup(v.status) !== g.name) continue;
          const i = dayIndex.get(v.day);
          const x = pick(v);
          if (i === undefined || x === null) continue;
          values[i] = (values[i] ?? 0n) + x;
        }
        return { name: g.name, values, color: g.color };
      }).filter((s) => s.values.some((v) => v !== null));
    const counts: ChartSpec = {
      id: `volume-count-${kind}`,
      title: `${KIND_LABEL[kind]} per day: count by status`,
      desc: `Live ${kind}s first seen on each local day of the last ${data.days} days, by current status, all currencies.`,
      labels,
      series: series((v) => BigInt(v.count)),
      format: count,
      width: 600,
    };
    const amounts: ChartSpec = {
      id: `volume-amount-${kind}`,
      title: `${KIND_LABEL[kind]} per day: ${data.currency ?? ''} amount by status`,
      desc: `Gross amounts in ${data.currency ?? 'no currency'} of live ${kind}s first seen on each local day of the last ${data.days} days, by current status.`,
      labels,
      series: series((v) => (v.currency === data.currency ? v.amount : null)),
      format: formatMoney,
      width: 600,
    };
    return [
      chartFigure(stackedBarChart(counts), counts, { total: true }),
      chartFigure(stackedBarChart(amounts), amounts, { total: true }),
    ];
  });
}

function exceptionChart(data: BalanceChartsData): SafeHtml {
  const severities = [...new Set(data.exceptionAges.map((r) => r.severity))].sort(
    (a, b) =>
      Object.keys(SEVERITY_COLORS).indexOf(a) - Object.keys(SEVERITY_COLORS).indexOf(b) || a.localeCompare(b),
  );
  const spec: ChartSpec = {
    id: 'exceptions-by-age',
    title: 'Open exceptions by age',
    desc: 'Exceptions not resolved, by time since first seen and by severity.',
    labels: AGE_BUCKETS.map((b) => b.label),
    series: severities.map((severity) => ({
      name: severity,
      color: SEVERITY_COLORS[severity] ?? '#000000',
      values: AGE_BUCKETS.map((b) => {
        const row = data.exceptionAges.find((r) => r.bucket === b.key && r.severity === severity);
        return row ? BigInt(row.count) : null;
      }),
    })),
    format: count,
    width: 600,
  };
  return chartFigure(stackedBarChart(spec), spec, { total: true });
}

export function balancesPage(ctx: PageContext, data: BalancesPageData): SafeHtml {
  return layout(
    { ...ctx, active: 'balances' },
    'Balances',
    html`<h1>Balances</h1><p class="muted">As of ${formatDateTime(data.at, ctx.timeZone)}. Reserved is held for cashouts and refunds in flight.</p>${
      data.balances.some((b) => b.available < 0n)
        ? html`<p class="notice" id="negative-available">A negative available means more was reserved for cashouts and refunds (taken from available when requested) than deposits have credited so far; it turns positive as the day's deposits are credited or the payouts are released.</p>`
        : ''
    }
${balancesTable(ctx, data)}
${cashLegTable(data)}
${providerBalanceTable(ctx, data)}
${movementsTable(data)}
<p id="charts-link"><a href="${ctx.base}/balances/charts">Charts</a>: available and reserved over time, daily volumes by kind and status, open exceptions by age.</p>`,
  );
}

export function balanceChartsPage(ctx: PageContext, data: BalanceChartsData): SafeHtml {
  const opt = (value: string | number, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? raw(' selected') : ''}>${label}</option>`;
  return layout(
    { ...ctx, active: 'balances/charts' },
    'Charts',
    html`<h1>Charts</h1><p class="muted">As of ${formatDateTime(data.at, ctx.timeZone)}. The balances and their movements are on <a href="${ctx.base}/balances">Balances</a>.</p>
<form class="inline" method="get" action="${ctx.base}/balances/charts">
<label>Days<select name="days">${CHART_DAYS.map((d) => opt(d, `last ${d} days`, d === data.days))}</select></label>
<label>Amounts in<select name="currency">${data.currencies.map((c) => opt(c, c, c === data.currency))}</select></label>
<button type="submit">Show</button></form>
<h2>Available and reserved over time</h2>
<div class="charts">${balanceCharts(data)}</div>
<h2>Daily volumes</h2>
<div class="charts">${volumeCharts(data)}</div>
<h2>Exceptions</h2>
<div class="charts">${exceptionChart(data)}</div>`,
  );
}
