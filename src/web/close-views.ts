/**
 * The month close's markup: the list of months per merchant account and currency,
 * and one close's page with its sign-off, proof, movements, in-flight payouts, open exceptions and
 * adjustments. Figures come as the close's document (src/domain/close.ts, amounts as decimal strings),
 * the same whether read from a signed close or computed now.
 */
import {
  afterStatement,
  type CloseAdjustmentLine,
  type CloseBankProofLine,
  type CloseDocument,
  type CloseStatus,
  type CloseUnmatchedItem,
  type ExplainedBankProofLine,
  isExplained,
  itemsNeedingNote,
  needsNoteMessage,
  nextPeriod,
  previousPeriod,
} from '../domain/close.ts';
import { parseLedgerMinor } from '../domain/money.ts';
import { paymentPath } from '../domain/payment-path.ts';
import { roleCan } from '../domain/roles.ts';
import { BANK_PROOF_CSS, bankProofTable } from './bank-proof-view.ts';
import { formatDateTime, formatMoney, html, type SafeHtml } from './html.ts';
import { layout, type PageContext } from './views.ts';

/** Extra rules of the close pages, served as /static/close.css (the page's CSP allows no inline style). */
export const CLOSE_CSS = `
.signoff{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem;background:#fff;padding:.7rem 1rem;margin:.5rem 0 1rem;box-shadow:0 1px 2px #0001;max-width:960px}
.signoff dt{color:#46505f;font-size:.85rem}.signoff dd{margin:0;overflow-wrap:anywhere}
.badge.prepared{background:#fff1c2;color:#6b4e00}.badge.approved{background:#d8f3dc;color:#1b5e20}
.badge.none{background:#e3e6eb;color:#46505f}
.ok{color:#1b5e20;font-weight:600}.bad{color:#b3261e;font-weight:600}
form.actions{display:flex;gap:.5rem;align-items:center;margin:.5rem 0 1rem}
tr.total td{font-weight:600;border-top:2px solid #c9ced6}
tr.total th{font-weight:600;border-top:2px solid #c9ced6}table.unmatched{margin-bottom:1rem}
.pager{display:flex;gap:1rem;margin:.2rem 0 .8rem}
h3.bank{font-size:1rem;margin:1.2rem 0 .2rem}
table.unmatched caption{text-align:left;font-weight:600;padding:.3rem 0}
table.unmatched{table-layout:fixed}table.unmatched td{overflow-wrap:anywhere}
table.unmatched th:nth-child(1){width:24%}table.unmatched th:nth-child(2){width:18%}table.unmatched th:nth-child(3){width:13%}
table.unmatched th:nth-child(4){width:11%}table.unmatched th:nth-child(6){width:12%}
${BANK_PROOF_CSS}
`;

/** One row of the close list: a month of one merchant account and currency. */
export interface CloseListRow {
  merchantAccount: string;
  currency: string;
  period: string;
  /** Null: not prepared yet. */
  status: CloseStatus | null;
  preparedBy: string | null;
  approvedBy: string | null;
}

/** The close list: its months, and the ledgers with no complete month since their first posting. */
export interface CloseList {
  rows: CloseListRow[];
  /** A ledger with no month to close yet; `firstMonth` null: no entries at all. */
  waiting: { merchantAccount: string; currency: string; firstMonth: string | null }[];
  /** The latest month that is over (`YYYY-MM`). */
  lastComplete: string;
}

/** One close's page. */
export interface ClosePageView {
  merchantAccount: string;
  currency: string;
  period: string;
  /** The signed close, or null when none yet (then `document` is computed now). */
  signed: {
    status: CloseStatus;
    preparedBy: string;
    preparedAt: Date;
    approvedBy: string | null;
    approvedAt: Date | null;
    sha256: string;
    verified: boolean;
  } | null;
  document: CloseDocument;
  /** Entries booked after the period with effect dates inside it (never in the signed figures). */
  postClose: CloseAdjustmentLine[];
  /** The period is over (it can be prepared). */
  over: boolean;
  /** The month of the ledger's first posting (`YYYY-MM`); null: none yet. */
  firstMonth: string | null;
  /** The month ends before the first posting: it has no figures, and nothing to sign. */
  beforeFirstPosting: boolean;
}

const HEAD = (ctx: PageContext) => html`<link rel="stylesheet" href="${ctx.base}/static/close.css">`;

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** `2026-09` as `September 2026`. */
export function monthName(period: string): string {
  const [y, m] = period.split('-');
  return `${MONTHS[Number(m) - 1] ?? m} ${y}`;
}

function amountCell(text: string | null): SafeHtml {
  if (text === null) return html`<td class="num muted">unknown</td>`;
  const minor = parseLedgerMinor(text);
  return html`<td class="num${minor < 0n ? ' neg' : ''}">${formatMoney(minor)}</td>`;
}

export function closePath(ctx: PageContext, account: string, currency: string, period: string): string {
  return `${ctx.base}/closes/${[account, currency, period].map(encodeURIComponent).join('/')}`;
}

function statusBadge(status: CloseStatus | null): SafeHtml {
  return status === null
    ? html`<span class="badge none">not prepared</span>`
    : html`<span class="badge ${status}">${status === 'prepared' ? 'prepared and signed' : 'approved'}</span>`;
}

export function closesListPage(ctx: PageContext, list: CloseList): SafeHtml {
  const { rows, waiting } = list;
  return layout(
    { ...ctx, active: 'closes' },
    'Month close',
    html`<h1>Month close</h1>
<p class="muted">One close per month, merchant account and currency, from the month of its first entry to the last complete month (${monthName(list.lastComplete)}). A controller prepares and signs it; a different controller approves it. Months run in ${ctx.timeZone}.</p>
${
  rows.length
    ? html`<table id="closes"><thead><tr><th>Month</th><th>Account</th><th>Currency</th><th>Status</th><th>Prepared by</th><th>Approved by</th></tr></thead><tbody>
${rows.map(
  (r) =>
    html`<tr><td><a href="${closePath(ctx, r.merchantAccount, r.currency, r.period)}">${monthName(r.period)}</a></td><td>${r.merchantAccount}</td><td>${r.currency}</td><td>${statusBadge(r.status)}</td><td>${r.preparedBy ?? ''}</td><td>${r.approvedBy ?? ''}</td></tr>`,
)}
</tbody></table>`
    : html`<p id="no-closes">No month to close yet.</p>`
}
${
  waiting.length
    ? html`<ul id="waiting" class="muted">${waiting.map(
        (w) =>
          html`<li>${w.merchantAccount} ${w.currency}: ${w.firstMonth === null ? 'no entries booked yet' : html`first entries in ${monthName(w.firstMonth)}, which is not over yet`}; nothing to close.</li>`,
      )}</ul>`
    : ''
}`,
    HEAD(ctx),
  );
}

function entityLink(ctx: PageContext, account: string, kind: string, id: string): SafeHtml {
  return html`<a href="${ctx.base}${paymentPath(account, kind, id)}">${kind} ${id}</a>`;
}

/** Adjustments with, as their month column, the month they moved (`booked`) or belong to (`effect`). */
function adjustmentsTable(
  ctx: PageContext,
  id: 'post-close' | 'earlier',
  doc: CloseDocument,
  rows: readonly CloseAdjustmentLine[],
): SafeHtml {
  const month = (a: CloseAdjustmentLine) => (id === 'post-close' ? a.bookedPeriod : a.effectPeriod);
  return html`<table id="${id}"><thead><tr><th>Payment</th><th>Effect</th><th>Effect date</th><th>Booked</th><th>${id === 'post-close' ? 'Moves the month' : 'Belongs to'}</th><th>Postings</th><th class="num">Available</th></tr></thead><tbody>
${rows.map(
  (a) =>
    html`<tr><td>${entityLink(ctx, doc.merchantAccount, a.entityKind, a.entityId)}</td><td>${a.effect}${a.direction === -1 ? ' (reversal)' : ''}</td><td class="when">${formatDateTime(new Date(a.effectiveAt), ctx.timeZone)}</td><td class="when">${formatDateTime(new Date(a.bookedAt), ctx.timeZone)}</td><td><a href="${closePath(ctx, doc.merchantAccount, doc.currency, month(a))}">${monthName(month(a))}</a></td><td>${a.postings.map((p) => html`${p.account} ${formatMoney(parseLedgerMinor(p.amount))}<br>`)}</td>${amountCell(a.available)}</tr>`,
)}
</tbody></table>`;
}

const statementName = (st: NonNullable<CloseBankProofLine['statement']>) =>
  `${st.statementId ?? `import ${st.importId}`} of ${st.date}`;

/** The rows of unmatched items: each linked to its exception and its reconciliation day, with its note. */
function itemRows(
  ctx: PageContext,
  p: CloseBankProofLine,
  items: readonly CloseUnmatchedItem[],
  needs: readonly CloseUnmatchedItem[],
  mark: (u: CloseUnmatchedItem) => SafeHtml | string = () => '',
): SafeHtml[] {
  return items.map(
    (u) =>
      html`<tr><td class="item">${u.kind === 'bank_line' ? 'bank line' : 'settlement'} ${u.exceptionId ? html`<a href="${ctx.base}/exceptions/${u.exceptionId}">${u.id}</a>` : u.id}${mark(u)}</td><td>${u.reference ?? ''}</td><td><a href="${ctx.base}/reconciliation/${encodeURIComponent(p.bankAccount)}/${u.date}">${u.date}</a></td><td class="num">${u.ageDays}</td><td>${u.noted ? html`<span class="ok">noted</span>` : needs.includes(u) ? html`<span class="bad">needs a note</span>` : 'none (at or below the amount)'}</td>${amountCell(u.amount)}</tr>`,
  );
}

const ITEM_HEAD = html`<thead><tr><th>Item</th><th>Reference</th><th>Date</th><th class="num">Age (days)</th><th>Note</th><th class="num">Amount</th></tr></thead>`;

/** A bank proof that explains its difference (version 2): the reconciliation, then its two groups. */
function explainedProof(
  ctx: PageContext,
  p: ExplainedBankProofLine,
  needs: readonly CloseUnmatchedItem[],
): SafeHtml {
  const lines = p.unmatched.filter((u) => u.kind === 'bank_line');
  const later = lines.filter((u) => afterStatement(p, u));
  const settlements = p.unmatched.filter((u) => u.kind === 'settlement');
  const first = p.firstStatement;
  const upTo = p.statement ? `booked on or before ${p.statement.date}` : 'no statement';
  return html`${bankProofTable({
    id: `bank-${p.bankAccount}`,
    statement: p.statement ? statementName(p.statement) : 'no statement on or before the last day',
    closing: p.statementClosing === null ? null : parseLedgerMinor(p.statementClosing),
    ledgerLabel: `bank:${p.bankAccount} at the cut-off`,
    ledger: parseLedgerMinor(p.ledger),
    firstStatement: first
      ? `${first.statementId ?? `import ${first.importId}`}, first line booked ${first.date}`
      : null,
    openingBeforeFirst: p.openingBeforeFirst === null ? null : parseLedgerMinor(p.openingBeforeFirst),
    linesLabel: 'Bank lines not in the ledger',
    linesWhy: `unmatched at the cut-off, ${upTo}`,
    lines: { count: lines.length - later.length, total: parseLedgerMinor(p.linesNotInLedger) },
    unexplained: p.unexplained === null ? null : parseLedgerMinor(p.unexplained),
  })}
<table class="unmatched" id="${`lines-${p.bankAccount}`}"><caption>Bank lines not in the ledger at the cut-off</caption>${ITEM_HEAD}<tbody>
${itemRows(ctx, p, lines, needs, (u) => (afterStatement(p, u) ? html` <span class="mark">after the statement</span>` : ''))}
${lines.length === 0 ? html`<tr><td colspan="6" class="muted">None: the ledger holds every bank line.</td></tr>` : ''}
<tr class="total"><td colspan="5">Total ${upTo} (${lines.length - later.length}): explains the difference</td>${amountCell(p.linesNotInLedger)}</tr>
${later.length ? html`<tr class="total"><td colspan="5">Booked after the statement, to the period's last day (${later.length}): in no statement reconciled here</td>${amountCell(p.linesAfterStatement)}</tr>` : ''}
</tbody></table>
<table class="unmatched" id="${`in-transit-${p.bankAccount}`}"><caption>Settlements in transit, not seen in the bank</caption>${ITEM_HEAD}<tbody>
${itemRows(ctx, p, settlements, needs)}
${settlements.length === 0 ? html`<tr><td colspan="6" class="muted">None: every settlement paid by the value date reached the bank.</td></tr>` : ''}
<tr class="total"><td colspan="5">Total (${settlements.length}): in settlements in transit, no part of the bank difference</td>${amountCell(p.inTransit)}</tr>
</tbody></table>`;
}

/** A bank proof signed before it explained its difference (version 1), as it was signed. */
function signedProofV1(
  ctx: PageContext,
  p: CloseBankProofLine,
  needs: readonly CloseUnmatchedItem[],
): SafeHtml {
  return html`<table class="bank-proof" id="${`bank-${p.bankAccount}`}"><tbody>
<tr><th>Statement</th><td>${p.statement ? statementName(p.statement) : 'no statement'}</td></tr>
<tr><th>Statement closing balance</th>${amountCell(p.statementClosing)}</tr>
<tr><th>Ledger bank:${p.bankAccount}</th>${amountCell(p.ledger)}</tr>
<tr class="sum"><th>Difference</th>${amountCell(p.difference)}</tr>
</tbody></table>
<p class="muted">Signed before the bank proof explained its difference: shown as signed, without the balance before the first statement or the unexplained difference.</p>
<table class="unmatched" id="${`unmatched-${p.bankAccount}`}">${ITEM_HEAD}<tbody>
${itemRows(ctx, p, p.unmatched, needs)}
<tr class="total"><td colspan="5">Total (${p.unmatched.length})</td>${amountCell(p.unmatchedTotal ?? null)}</tr>
</tbody></table>`;
}

/** The bank proof: per bank account, the reconciliation of its statement and the items unmatched at the cut-off. */
function bankProofSection(ctx: PageContext, d: CloseDocument): SafeHtml | string {
  const proofs = d.bankProof;
  if (!proofs) return '';
  const above = d.noteAbove ?? '0.00';
  const needs = itemsNeedingNote(proofs, parseLedgerMinor(above), parseLedgerMinor);
  return html`<h2>Bank proof at the cut-off</h2>
<p class="muted">Per bank account, the last imported statement on or before the period's last day against the ledger's bank account at the cut-off, and what explains their difference. Every unmatched item above ${formatMoney(parseLedgerMinor(above))}, bank line or settlement, needs a note on its exception before the close is signed.</p>
<div id="bank-proof">
${proofs.map(
  (p) =>
    html`<h3 class="bank">${p.bankAccount}${p.name ? ` · ${p.name}` : ''}</h3>${isExplained(p) ? explainedProof(ctx, p, needs) : signedProofV1(ctx, p, needs)}`,
)}
</div>
${needs.length ? html`<p id="bank-proof-result" class="bad">${needsNoteMessage(needs, above)}</p>` : html`<p id="bank-proof-result" class="ok">Every unmatched item above ${above} has a note.</p>`}`;
}

export function closePage(ctx: PageContext, v: ClosePageView, notice: string | null): SafeHtml {
  const d = v.document;
  const s = v.signed;
  const canSign = ctx.role !== undefined && roleCan(ctx.role, 'sign-close');
  const form = (action: 'prepare' | 'approve', label: string) =>
    html`<form class="actions" method="post" action="${closePath(ctx, v.merchantAccount, v.currency, v.period)}/${action}"><input type="hidden" name="_csrf" value="${ctx.csrf}"><button type="submit" name="action" value="${action}">${label}</button></form>`;
  const scopeName = `${v.merchantAccount} ${v.currency}`;
  // A month without figures says so before anything else, whoever reads it.
  let data: SafeHtml | string = '';
  if (!s && v.beforeFirstPosting) {
    data = html`<div class="notice" id="no-data" role="status">Nothing to close: ${scopeName} has ${v.firstMonth === null ? 'no entries yet' : `no entries before ${monthName(v.firstMonth)}`}, so ${monthName(v.period)} has no figures to sign.</div>`;
  } else if (d.movements.length === 0) {
    data = html`<div class="notice" id="no-data" role="status">No entries were booked for ${scopeName} in ${monthName(v.period)}: its closing balances are its opening ones${s ? '' : ', and signing it attests that nothing moved'}.</div>`;
  }
  let actions: SafeHtml | string = '';
  if (!canSign) {
    actions = html`<p class="muted">Only a controller can prepare or approve a close (your role: ${ctx.role ?? 'viewer'}).</p>`;
  } else if (!s && v.beforeFirstPosting) {
    actions = '';
  } else if (!s && !v.over) {
    actions = html`<p class="muted">This month is not over yet: it can be prepared from ${formatDateTime(new Date(d.end), ctx.timeZone)}.</p>`;
  } else if (!s) {
    actions = form('prepare', 'Prepare and sign');
  } else if (s.status === 'prepared' && s.preparedBy === ctx.username) {
    actions = html`<p class="muted" id="awaiting-approval">You prepared and signed this close: a different controller must approve it.</p>`;
  } else if (s.status === 'prepared') {
    actions = html`${form('approve', 'Approve')}<p class="muted">A different controller than ${s.preparedBy} must approve.</p>`;
  }
  const proof = parseLedgerMinor(d.proof);
  const inFlight = parseLedgerMinor(d.inFlightTotal);
  const reserved = parseLedgerMinor(d.reservedAtEnd);
  const prev = previousPeriod(v.period);
  const next = nextPeriod(v.period);
  return layout(
    { ...ctx, active: 'closes' },
    `Close ${v.merchantAccount} ${v.currency} ${v.period}`,
    html`<h1>Close of ${monthName(v.period)} · ${v.merchantAccount} · ${v.currency} ${statusBadge(s?.status ?? null)}</h1>
<div class="pager"><a href="${closePath(ctx, v.merchantAccount, v.currency, prev)}">← ${monthName(prev)}</a><a href="${ctx.base}/closes">All closes</a><a href="${closePath(ctx, v.merchantAccount, v.currency, next)}">${monthName(next)} →</a></div>
${notice ? html`<div class="notice" role="status">${notice}</div>` : ''}
${data}
<dl class="signoff" id="signoff">
<dt>Period</dt><dd>${formatDateTime(new Date(d.start), ctx.timeZone)} to ${formatDateTime(new Date(d.end), ctx.timeZone)} (${d.timeZone}); the cut-off is the end</dd>
${
  s
    ? html`<dt>Prepared and signed</dt><dd>${s.preparedBy}, ${formatDateTime(s.preparedAt, ctx.timeZone)}</dd>
<dt>Approved</dt><dd>${s.approvedBy ? html`${s.approvedBy}, ${formatDateTime(s.approvedAt, ctx.timeZone)}` : 'not yet'}</dd>
<dt>SHA-256</dt><dd><code>${s.sha256}</code> ${s.verified ? html`<span class="ok">matches the stored figures</span>` : html`<span class="bad">does NOT match the stored figures</span>`}</dd>
<dt>Figures</dt><dd>frozen at signing; entries booked later are listed as post-close adjustments below</dd>`
    : html`<dt>Figures</dt><dd>computed now from the ledger; not signed</dd>`
}
</dl>
${actions}
<h2>Proof per account</h2>
<table id="proof"><thead><tr><th>Book</th><th>Account</th><th class="num">Opening</th><th class="num">Movements</th><th class="num">Closing</th><th class="num">Proof</th></tr></thead><tbody>
${d.accounts.map(
  (a) =>
    html`<tr><td>${a.book}</td><td>${a.account}</td>${amountCell(a.opening)}${amountCell(a.movements)}${amountCell(a.closing)}${amountCell(a.proof)}</tr>`,
)}
</tbody></table>
<p id="proof-result">Proof (opening + movements - closing, every account): ${proof === 0n ? html`<span class="ok">0.00, it holds</span>` : html`<span class="bad">${formatMoney(proof)} off: this month cannot be signed</span>`}</p>
${bankProofSection(ctx, d)}
<h2>Movements by effect</h2>
<table id="movements"><thead><tr><th>Book</th><th>Account</th><th>Kind</th><th>Effect</th><th class="num">Entries</th><th class="num">Amount</th></tr></thead><tbody>
${d.movements.map(
  (m) =>
    html`<tr><td>${m.book}</td><td>${m.account}</td><td>${m.entityKind}</td><td>${m.effect}${m.direction === -1 ? ' (reversal)' : ''}</td><td class="num">${m.entries}</td>${amountCell(m.amount)}</tr>`,
)}
</tbody></table>
<h2>Cashouts and refunds in flight at the cut-off</h2>
<table id="in-flight" class="narrow"><thead><tr><th>Payment</th><th>Reserved since</th><th class="num">Amount</th></tr></thead><tbody>
${d.inFlight.map(
  (f) =>
    html`<tr><td>${entityLink(ctx, d.merchantAccount, f.kind, f.entityId)}</td><td class="when">${formatDateTime(new Date(f.reservedAt), ctx.timeZone)}</td>${amountCell(f.amount)}</tr>`,
)}
<tr class="total"><td colspan="2">Total (${d.inFlight.length})${inFlight === reserved ? ' = reserved at the cut-off' : html` <span class="bad">differs from reserved at the cut-off (${formatMoney(reserved)})</span>`}</td>${amountCell(d.inFlightTotal)}</tr>
</tbody></table>
<h2>Exceptions open at the cut-off</h2>
<table id="exceptions"><thead><tr><th>Type</th><th>Severity</th><th>Payment</th><th>First seen</th><th class="num">Amount</th></tr></thead><tbody>
${d.exceptions.map(
  (x) =>
    html`<tr><td>${x.type}</td><td>${x.severity}</td><td>${entityLink(ctx, d.merchantAccount, x.entityKind, x.entityId)}</td><td class="when">${formatDateTime(new Date(x.firstSeenAt), ctx.timeZone)}</td>${amountCell(x.amount)}</tr>`,
)}
<tr class="total"><td colspan="4">Total (${d.exceptions.length})</td>${amountCell(d.exceptionsTotal)}</tr>
</tbody></table>
<h2>Post-close adjustments booked after this month</h2>
<p class="muted">Entries booked after the cut-off whose effect date falls in ${monthName(v.period)}. They move the month they were booked in; ${s ? 'the signed figures above do not change.' : 'this month’s figures do not include them.'}</p>
${v.postClose.length ? adjustmentsTable(ctx, 'post-close', d, v.postClose) : html`<p id="post-close-none">None.</p>`}
<h2>Adjustments to earlier months booked in this month</h2>
<p class="muted">Entries booked in ${monthName(v.period)} whose effect date falls in an earlier month (part of this month’s movements).</p>
${d.earlierPeriodAdjustments.length ? adjustmentsTable(ctx, 'earlier', d, d.earlierPeriodAdjustments) : html`<p>None.</p>`}`,
    HEAD(ctx),
  );
}
