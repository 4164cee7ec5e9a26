/**
 * The exception queue's pages: the list (filters that keep their input, counts per age
 * bucket, due time and overdue mark per row, a row's quick moves, bulk acknowledge or resolve with one
 * note, CSV export of the filtered list, a page at a time) and one exception with its audit trail
 * (assign, take, comment, state changes). Fits a 1280px window: a row's facts fold into a details
 * element. Routes in src/web/exception-routes.ts; the layout in views.ts, the queue's own style sheet
 * here (EXCEPTION_CSS, served by the routes).
 */
import type { QueueEvent, QueueRow } from '../db/exceptions/queue.ts';
import type { ExceptionFacts } from '../db/exceptions/raise.ts';
import { type PaidAmount, paidKey } from '../db/read-models/payments.ts';
import {
  AGE_BUCKETS,
  type AgeBucketKey,
  EXCEPTION_STATES,
  type ExceptionState,
  MOVE_FROM,
} from '../domain/exception-queue.ts';
import { DECIDED_TYPES, refusedReading } from '../domain/exception-rules.ts';
import { parseAmount } from '../domain/money.ts';
import { roleCan } from '../domain/roles.ts';
import { ENTITY_KINDS } from '../domain/statuses.ts';
import { ageBucketLabel } from '../reports/exception-csv.ts';
import { codeText, formatAge, formatDateTime, formatMoney, html, raw, type SafeHtml } from './html.ts';
import { paymentHref } from './payment-views.ts';
import { layout, type PageContext } from './views.ts';

export type { AgeBucketKey, ExceptionState };
export { AGE_BUCKETS, EXCEPTION_STATES };

/** An exception as the page lists it (a row of `listQueue`, src/db/exception-queue.ts). */
export type ExceptionView = QueueRow;

export const EXCEPTION_CSS = `
main{overflow-x:visible}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
table.queue{table-layout:fixed;font-size:.9rem}
table.queue th,table.queue td{padding:.35rem .45rem;overflow-wrap:break-word}
table.queue col.pick{width:2rem}table.queue col.what{width:auto}table.queue col.amount{width:8.5rem}
table.queue col.state{width:8rem}table.queue col.when{width:11rem}table.queue col.facts{width:17rem}
table.queue col.act{width:13rem}
table.queue .sev{font-size:.75rem;color:#46505f;text-transform:uppercase}
table.queue details summary{cursor:pointer;color:#2456c7}
table.queue dl.facts{min-width:0}table.queue .rule{min-width:0}
.due,.age{white-space:nowrap}
.rowact{display:flex;flex-direction:column;gap:.3rem}
.rowact input{width:100%}
.rowact .buttons{display:flex;flex-wrap:wrap;gap:.3rem}
.rowact button{padding:.15rem .45rem;font-size:.85rem}
tr.overdue td{background:#fff8f7}
.mark.overdue{background:#b3261e;color:#fff}
.badge.in_review{background:#dbe4ff;color:#1d3a8a}
.buckets{display:flex;gap:.5rem;flex-wrap:wrap;margin:.2rem 0 .6rem}
.buckets a{display:inline-block;padding:.2rem .6rem;border-radius:12px;background:#fff;border:1px solid #c9d0db;text-decoration:none;color:#1d2430;font-size:.85rem}
.buckets a.on{background:#1d2a44;color:#fff;border-color:#1d2a44}
form.filters label{font-size:.75rem}
form.filters input,form.filters select{padding:.2rem .35rem;font-size:.85rem}
form.filters input.amount{width:7rem}form.filters input.currency{width:4.5rem}
form.bulk{display:flex;gap:.5rem;align-items:end;flex-wrap:wrap;background:#fff;padding:.5rem .7rem;box-shadow:0 1px 2px #0001}
form.bulk input[name=note]{width:24rem}
form.upload{margin-top:.5rem}form.upload .muted{flex-basis:100%;font-size:.85rem}
ul.refused{background:#fff;padding:.6rem 1.6rem;box-shadow:0 1px 2px #0001}ul.refused li{margin:.2rem 0}
.pager{display:flex;gap:1rem;align-items:center}
.detail{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1rem}
.detail section{background:#fff;padding:.6rem .9rem;box-shadow:0 1px 2px #0001}
.detail dl{display:grid;grid-template-columns:auto 1fr;gap:.2rem .8rem;margin:0}
.detail dt{color:#46505f;font-size:.85rem}.detail dd{margin:0;min-width:0;overflow-wrap:anywhere}
.detail h3{font-size:.95rem;margin:.8rem 0 .3rem}
.detail form{margin:.4rem 0}
.detail textarea{width:100%;min-height:4rem;font:inherit}
`;

/** What the filter form shows: exactly what was typed (so an error keeps it), every field text. */
export interface QueueForm {
  type: string;
  state: string;
  assignee: string;
  account: string;
  currency: string;
  age: string;
  min: string;
  max: string;
  overdue: string;
}

export const QUEUE_FORM_FIELDS = [
  'type',
  'state',
  'assignee',
  'account',
  'currency',
  'age',
  'min',
  'max',
  'overdue',
] as const satisfies readonly (keyof QueueForm)[];

/** The query string of a filter form (empty fields left out), with extra parameters. */
export function queueQuery(form: QueueForm, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  for (const k of QUEUE_FORM_FIELDS) if (form[k]) q.set(k, form[k]);
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export interface QueueListPage {
  rows: readonly ExceptionView[];
  /** What the customer paid, for the rows that need it, keyed by `paidKey`. */
  paid: ReadonlyMap<string, PaidAmount>;
  /** Exceptions matching the filter per age bucket (the form's age left out). */
  ageCounts: Record<AgeBucketKey, number>;
  types: readonly string[];
  accounts: readonly string[];
  users: readonly string[];
  form: QueueForm;
  /** The id the page starts after (keyset), null on the first page. */
  after: string | null;
  /** The id to continue after, null on the last page. */
  nextAfter: string | null;
  now: Date;
  notice: string | null;
  error: string | null;
}

/** A fact's amount (decimal text) as the page writes money, grouped like the Amount column. */
function amountText(amount: string | null, currency: string | null): string {
  if (amount === null) return 'not reported';
  let shown = amount;
  try {
    shown = formatMoney(parseAmount(amount, { allowNegative: true }));
  } catch {
    // Not decimal text: shown as recorded.
  }
  return `${shown} ${currency ?? ''}`.trim();
}

const factsOf = (e: ExceptionView) => (e.details?.facts ?? null) as ExceptionFacts | null;

const canWork = (ctx: PageContext) => ctx.role !== undefined && roleCan(ctx.role, 'work-exceptions');

/**
 * The facts: ids, intent and provider amounts (and, when the customer paid another amount, what was
 * paid), status and reason, the rule in one sentence.
 */
function factsList(e: ExceptionView, ctx: PageContext, paid: ReadonlyMap<string, PaidAmount>): SafeHtml {
  const f = factsOf(e);
  const reason = f
    ? [f.statusReason, f.rejectionCode && `${f.rejectionCode} ${f.rejectionReason ?? ''}`.trim()]
        .filter((r): r is string => Boolean(r))
        .join(', ')
    : '';
  const customerPaid = paid.get(paidKey(e.merchantAccount, e.kind, e.entityId));
  const paidLine =
    e.type === 'PROVIDER_AMOUNT_MISMATCH'
      ? html`<dt>Paid</dt><dd class="paid">${
          customerPaid
            ? `${formatMoney(customerPaid.amount)} ${customerPaid.currency ?? f?.providerCurrency ?? ''}`.trim()
            : "not in the provider's answer"
        }</dd>`
      : '';
  const refused = refusedReading(e.type, e.details);
  const said = refused
    ? html`<dt>${e.type === 'FACTS_CHANGED' ? 'Changed' : 'Provider said'}</dt><dd class="refused">${refused}</dd>`
    : '';
  return html`${
    f
      ? html`<dl class="facts"><dt>${e.kind === 'deposit' ? 'Invoice' : e.kind === 'cashout' ? 'External id' : 'Reference'}</dt><dd>${f.externalRef ?? 'none'}</dd>
<dt>Intent</dt><dd>${amountText(f.intentAmount, f.intentCurrency)}</dd>
<dt>Provider</dt><dd>${amountText(f.providerAmount, f.providerCurrency)}</dd>${paidLine}
<dt>Status</dt><dd>${codeText(f.status ?? 'none')}</dd>${reason ? html`<dt>Reason</dt><dd>${codeText(reason)}</dd>` : ''}${said}</dl><div class="rule">${f.rule}</div>`
      : html`<span class="muted">No facts recorded.</span>`
  }${
    e.reopenReason
      ? html`<div class="reopened">Reopened ${formatDateTime(e.reopenedAt, ctx.timeZone)} on a new fact: ${e.reopenReason}</div>`
      : ''
  }${
    e.state !== 'resolved' && e.resolvedBy
      ? html`<div class="resolved-before">Resolved before by ${e.resolvedBy}${e.resolvedAt ? html`, ${formatDateTime(e.resolvedAt, ctx.timeZone)}` : ''}: ${e.resolutionNote ?? ''}</div>`
      : ''
  }`;
}

/** Due time and the overdue mark. */
function dueCell(e: ExceptionView, ctx: PageContext): SafeHtml {
  return html`${formatDateTime(e.dueAt, ctx.timeZone)}${e.overdue ? html` <span class="mark overdue">overdue</span>` : ''}`;
}

function entityLink(ctx: PageContext, e: ExceptionView): SafeHtml {
  // A bank line or a settlement has no payment page.
  return ctx.search && (ENTITY_KINDS as readonly string[]).includes(e.kind)
    ? html`<a href="${paymentHref(ctx, e.merchantAccount, e.kind, e.entityId)}">${e.entityId}</a>`
    : html`${e.entityId}`;
}

const amountCell = (e: ExceptionView) =>
  e.amount === null
    ? html`<span class="muted">none</span>`
    : html`${formatMoney(e.amount)} ${e.currency ?? ''}`;

/** The moves an operator makes on an exception; `back` is where the page returns after. */
function moveButtons(e: ExceptionView, ctx: PageContext): SafeHtml {
  if (e.state === 'resolved') return html``;
  return html`${e.assignee !== ctx.username ? html`<button class="secondary" name="action" value="take">Take it</button>` : ''}
${(MOVE_FROM.in_review as readonly string[]).includes(e.state) ? html`<button class="secondary" name="action" value="review">In review</button>` : ''}
${(MOVE_FROM.acknowledged as readonly string[]).includes(e.state) ? html`<button class="secondary" name="action" value="acknowledge">Acknowledge</button>` : ''}
${
  e.proposal
    ? html`<button class="secondary" name="action" value="keep-ledger">Keep the ledger's ${e.type === 'FACTS_CHANGED' ? 'facts' : 'status'}</button>`
    : e.type === 'ILLEGAL_TRANSITION'
      ? html`<button name="action" value="accept-provider">Accept the provider's status</button>
<button class="secondary" name="action" value="keep-ledger">Keep the ledger's status</button>`
      : e.type === 'FACTS_CHANGED'
        ? html`<button name="action" value="accept-provider">Accept the provider's facts</button>
<button class="secondary" name="action" value="keep-ledger">Keep the ledger's facts</button>`
        : html`<button name="action" value="resolve">Resolve</button>`
}`;
}

function rowActions(e: ExceptionView, ctx: PageContext, back: string): SafeHtml {
  if (e.state === 'resolved' || !canWork(ctx)) return html``;
  return html`<form class="rowact" method="post" action="${ctx.base}/exceptions/${e.id}">
<input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="back" value="${back}">
<input name="note" placeholder="Note" aria-label="Note for ${e.type} ${e.entityId}" maxlength="1000">
<div class="buttons">${moveButtons(e, ctx)}</div></form>`;
}

export function exceptionsPage(ctx: PageContext, p: QueueListPage): SafeHtml {
  const { form } = p;
  const opt = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? raw(' selected') : ''}>${label}</option>`;
  const work = canWork(ctx);
  const here = `${ctx.base}/exceptions${queueQuery(form, p.after ? { after: p.after } : {})}`;
  const total = AGE_BUCKETS.reduce((n, b) => n + p.ageCounts[b.key], 0);
  const bucketLink = (key: string, label: string, n: number) =>
    html`<a href="${ctx.base}/exceptions${queueQuery({ ...form, age: key })}" class="${form.age === key ? 'on' : ''}" data-bucket="${key || 'any'}">${label} <strong>${n}</strong></a>`;
  return layout(
    { ...ctx, active: 'exceptions' },
    'Exceptions',
    html`<h1>Exceptions</h1>
${p.notice ? html`<div class="notice" role="status">${p.notice}</div>` : ''}
${p.error ? html`<div class="notice error" role="alert">${p.error}</div>` : ''}
<nav class="buckets" aria-label="Age buckets">${bucketLink('', 'Any age', total)}${AGE_BUCKETS.map((b) =>
      bucketLink(b.key, b.label, p.ageCounts[b.key]),
    )}</nav>
<form class="inline filters" method="get" action="${ctx.base}/exceptions">
<label>Type<select name="type">${opt('', 'All types', !form.type)}${p.types.map((t) => opt(t, t, form.type === t))}</select></label>
<label>State<select name="state">${opt('', 'Not resolved', !form.state)}${EXCEPTION_STATES.map((s) =>
      opt(s, s.replace('_', ' '), form.state === s),
    )}</select></label>
<label>Assignee<select name="assignee">${opt('', 'Anyone', !form.assignee)}${opt('-', 'Unassigned', form.assignee === '-')}${p.users.map(
      (u) => opt(u, u, form.assignee === u),
    )}</select></label>
<label>Account<select name="account">${opt('', 'All accounts', !form.account)}${p.accounts.map((a) =>
      opt(a, a, form.account === a),
    )}</select></label>
<label>Currency<input class="currency" name="currency" value="${form.currency}" maxlength="3" placeholder="BRL"></label>
<label>Age<select name="age">${opt('', 'Any age', !form.age)}${AGE_BUCKETS.map((b) => opt(b.key, b.label, form.age === b.key))}</select></label>
<label>Amount from<input class="amount" name="min" value="${form.min}" inputmode="decimal" placeholder="0.00"></label>
<label>to<input class="amount" name="max" value="${form.max}" inputmode="decimal" placeholder="any"></label>
<label>Due<select name="overdue">${opt('', 'Any', !form.overdue)}${opt('true', 'Overdue', form.overdue === 'true')}${opt(
      'false',
      'Not overdue',
      form.overdue === 'false',
    )}</select></label>
<button type="submit">Filter</button>
<a href="${ctx.base}/exceptions/export${queueQuery(form)}" download id="export">Export CSV</a></form>
${
  work
    ? html`<form class="bulk" id="bulk" method="post" action="${ctx.base}/exceptions/bulk">
<input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="back" value="${here}">
<label>Note for the selected rows<input name="note" maxlength="1000" required></label>
<button class="secondary" name="action" value="acknowledge">Acknowledge selected</button>
<button name="action" value="resolve">Resolve selected</button></form>`
    : ''
}
${
  work
    ? html`<form class="bulk upload" id="workbook-upload" method="post" action="${ctx.base}/exceptions/decisions" enctype="multipart/form-data">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Exception workbook with decisions<input type="file" name="workbook" accept=".xlsx,application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" required></label>
<button class="secondary">Upload decisions</button>
<span class="muted">Download the exception workbook from <a href="${ctx.base}/reports">Reports</a>, fill its Decision and Note columns, upload it here: every row is checked and all are applied or none.</span></form>`
    : ''
}
<table class="queue"><colgroup>${work ? raw('<col class="pick">') : ''}<col class="what"><col class="amount"><col class="state"><col class="when"><col class="facts">${
      work ? raw('<col class="act">') : ''
    }</colgroup>
<thead><tr>${work ? raw('<th><span class="sr">Select</span></th>') : ''}<th>Exception</th><th class="num">Amount</th><th>State</th><th>Age · due</th><th>Facts</th>${
      work ? raw('<th>Action</th>') : ''
    }</tr></thead>
<tbody>${
      p.rows.length
        ? p.rows.map(
            (e) => html`<tr data-exception="${e.id}" class="${e.overdue ? 'overdue' : ''}">${
              work
                ? html`<td><input type="checkbox" name="ids" value="${e.id}" form="bulk" aria-label="Select ${e.type} ${e.entityId}"${e.state === 'resolved' ? raw(' disabled') : ''}></td>`
                : ''
            }
<td><a href="${ctx.base}/exceptions/${e.id}" class="type">${codeText(e.type)}</a> <span class="sev">${e.severity}</span><div>${e.kind} ${entityLink(ctx, e)}</div><div class="muted">${e.merchantAccount}</div></td>
<td class="num">${amountCell(e)}</td>
<td><span class="badge ${e.state}">${e.state.replace('_', ' ')}</span>${e.proposal && e.state !== 'resolved' ? html`<div class="muted proposed">decision waiting for approval</div>` : ''}<div class="muted assignee">${e.assignee ? `@${e.assignee}` : 'unassigned'}</div></td>
<td><span class="age">${formatAge(p.now.getTime() - e.firstSeenAt.getTime())}</span> <span class="muted">(${ageBucketLabel(e.firstSeenAt, p.now)})</span><div class="due">due ${dueCell(e, ctx)}</div></td>
<td><details><summary>Facts${e.count > 1 ? ` · seen ${e.count}×` : ''}</summary>${factsList(e, ctx, p.paid)}</details>${
              e.lastNote
                ? html`<div class="note">${e.lastNote.note}<div class="muted">${e.lastNote.actor}, ${formatDateTime(e.lastNote.at, ctx.timeZone)}</div></div>`
                : ''
            }${e.reopenReason ? html`<div class="mark">reopened</div>` : ''}</td>${
              work ? html`<td>${rowActions(e, ctx, here)}</td>` : ''
            }</tr>`,
          )
        : html`<tr><td colspan="7" class="muted">No exceptions match.</td></tr>`
    }</tbody></table>
<p class="pager">${p.after ? html`<a href="${ctx.base}/exceptions${queueQuery(form)}">First page</a>` : ''}${
      p.nextAfter
        ? html`<a href="${ctx.base}/exceptions${queueQuery(form, { after: p.nextAfter })}" rel="next">Next page</a>`
        : ''
    }<span class="muted">${p.rows.length} shown, oldest first</span></p>`,
    html`<link rel="stylesheet" href="${ctx.base}/static/exceptions.css">`,
  );
}

function eventText(e: QueueEvent): string {
  if (e.action === 'state') return `${e.fromState ?? '?'} → ${e.toState ?? '?'}`;
  if (e.action === 'assign') return `assignee ${e.fromAssignee ?? 'none'} → ${e.toAssignee ?? 'none'}`;
  if (e.action === 'propose') return 'decision proposed';
  if (e.action === 'approve') return 'decision approved';
  if (e.action === 'reject') return 'proposal rejected';
  return 'comment';
}

/** A decision waiting for a controller: who proposed what, and (for a controller) approve or reject. */
function proposalSection(ctx: PageContext, e: ExceptionView, hidden: SafeHtml): SafeHtml {
  const p = e.proposal as { by?: string; at?: string; note?: string; summary?: string } | null;
  if (!p || e.state === 'resolved') return html``;
  const controller = ctx.role !== undefined && roleCan(ctx.role, 'approve-booking');
  const own = p.by === ctx.username;
  return html`<section class="proposal" id="proposal"><h2>Waiting for approval</h2>
<p><strong>${p.by ?? '?'}</strong> proposed to ${p.summary ?? ''}, ${formatDateTime(p.at ? new Date(p.at) : null, ctx.timeZone)}: ${p.note ?? ''}</p>
<p class="muted">Nothing is booked until a controller who did not propose it approves.</p>${
    controller
      ? html`<form method="post" action="${ctx.base}/exceptions/${e.id}" class="inline">${hidden}
<label>Note (required to reject)<input name="note" maxlength="1000"></label>${
          own
            ? html`<span class="muted">You proposed it: another controller approves it.</span>`
            : html`<button name="action" value="approve">Approve and book</button>`
        }<button class="secondary" name="action" value="reject">Reject</button></form>`
      : html`<p class="muted">A controller approves or rejects it.</p>`
  }</section>`;
}

/** One exception: what it is about, its due time, the moves, and its audit trail (oldest first). */
export function exceptionPage(
  ctx: PageContext,
  e: ExceptionView,
  events: readonly QueueEvent[],
  users: readonly string[],
  now: Date,
  notice: string | null,
  paid: ReadonlyMap<string, PaidAmount> = new Map(),
): SafeHtml {
  const work = canWork(ctx) && e.state !== 'resolved';
  const back = `${ctx.base}/exceptions/${e.id}`;
  const hidden = html`<input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="back" value="${back}">`;
  const when = (d: Date | null) => formatDateTime(d, ctx.timeZone);
  return layout(
    { ...ctx, active: 'exceptions' },
    `${e.type} ${e.entityId}`,
    html`<h1>${e.type} <span class="muted">#${e.id} · ${e.severity}</span></h1>
${notice ? html`<div class="notice" role="status">${notice}</div>` : ''}
<div class="detail" data-exception="${e.id}">
<section><h2>The exception</h2><dl>
<dt>Entity</dt><dd>${e.kind} ${entityLink(ctx, e)} · ${e.merchantAccount}</dd>
${
  e.kind === 'bank_line' || e.kind === 'settlement'
    ? html`<dt>Reconciliation</dt><dd><a id="reconciliation-day" href="${ctx.base}/reconciliation/for/${e.kind}/${encodeURIComponent(e.entityId)}">The bank account's day</a></dd>`
    : ''
}<dt>Amount</dt><dd>${amountCell(e)}</dd>
<dt>State</dt><dd><span class="badge ${e.state}" id="state">${e.state.replace('_', ' ')}</span>${e.proposal && e.state !== 'resolved' ? html` <span class="muted">· decision waiting for approval</span>` : ''}</dd>
<dt>Assignee</dt><dd id="assignee">${e.assignee ?? 'unassigned'}${e.assignedAt ? html` <span class="muted">since ${when(e.assignedAt)}</span>` : ''}</dd>
<dt>First seen</dt><dd>${when(e.firstSeenAt)} <span class="muted">(${formatAge(now.getTime() - e.firstSeenAt.getTime())}, ${ageBucketLabel(e.firstSeenAt, now)})</span></dd>
<dt>Due</dt><dd id="due">${dueCell(e, ctx)}</dd>
<dt>Seen</dt><dd>${e.count} time${e.count === 1 ? '' : 's'}, last ${when(e.lastSeenAt)}</dd>
${
  e.state === 'resolved'
    ? html`<dt>Resolved</dt><dd id="resolution">by <strong>${e.resolvedBy ?? 'unknown'}</strong>${e.resolvedAt ? html`, ${when(e.resolvedAt)}` : ''}: ${e.resolutionNote ?? ''}</dd>`
    : ''
}</dl><h3>Facts</h3>${factsList(e, ctx, paid)}</section>
${proposalSection(ctx, e, hidden)}
<section><h2>Work it</h2>${
      work
        ? html`<form method="post" action="${ctx.base}/exceptions/${e.id}" class="inline">${hidden}
<label>${(DECIDED_TYPES as readonly string[]).includes(e.type) ? 'Note (required for a decision: why it is right)' : 'Note (optional)'}<input name="note" maxlength="1000"></label><div class="rowact"><div class="buttons">${moveButtons(e, ctx)}</div></div></form>
<form method="post" action="${ctx.base}/exceptions/${e.id}" class="inline">${hidden}
<label>Assign to<select name="assignee"><option value="">nobody</option>${users.map(
            (u) => html`<option value="${u}"${u === e.assignee ? raw(' selected') : ''}>${u}</option>`,
          )}</select></label><button class="secondary" name="action" value="assign">Assign</button></form>`
        : html`<p class="muted">${e.state === 'resolved' ? 'Resolved: nothing left to do.' : 'Your role can read the queue but not work it.'}</p>`
    }${
      canWork(ctx)
        ? html`<form method="post" action="${ctx.base}/exceptions/${e.id}">${hidden}
<label>Comment<textarea name="note" maxlength="1000" required></textarea></label>
<button name="action" value="comment">Add comment</button></form>`
        : ''
    }</section></div>
<h2>Audit trail</h2>
<table class="trail"><thead><tr><th>When</th><th>Who</th><th>What changed</th><th>Note</th></tr></thead><tbody>${
      events.length
        ? events.map(
            (v) =>
              html`<tr data-event="${v.action}"><td class="when">${when(v.at)}</td><td>${v.actor}</td><td>${eventText(v)}</td><td>${v.note ?? ''}</td></tr>`,
          )
        : html`<tr><td colspan="4" class="muted">Nothing done yet.</td></tr>`
    }</tbody></table>
<p><a href="${ctx.base}/exceptions">Back to the queue</a></p>`,
    html`<link rel="stylesheet" href="${ctx.base}/static/exceptions.css">`,
  );
}

/** An uploaded workbook refused: nothing was decided; one line per refused row, with its rules. */
export function uploadRefusedPage(ctx: PageContext, fileName: string, lines: readonly string[]): SafeHtml {
  return layout(
    { ...ctx, active: 'exceptions' },
    'Decisions refused',
    html`<h1>Decisions refused</h1>
<div class="notice error" role="alert">Nothing was decided from ${fileName}: fix the rows below (or leave their Decision empty) and upload it again.</div>
<ul class="refused" id="refused">${lines.map((l) => html`<li>${l}</li>`)}</ul>
<p><a href="${ctx.base}/exceptions">Back to the queue</a></p>`,
    html`<link rel="stylesheet" href="${ctx.base}/static/exceptions.css">`,
  );
}
