/**
 * The exception queue's page (issue 18 point 2): the list with its filters and the actions an operator
 * takes on a row. Routes in src/web/exception-routes.ts; the layout and shared cells in views.ts.
 */
import type { ExceptionListRow } from '../db/exceptions.ts';
import {
  AGE_BUCKETS,
  type AgeBucketKey,
  EXCEPTION_STATES,
  type ExceptionState,
} from '../domain/exception-queue.ts';
import { roleCan } from '../domain/roles.ts';
import { formatAge, formatDateTime, html, raw, type SafeHtml } from './html.ts';
import { layout, type PageContext, paymentHref } from './views.ts';

export type { AgeBucketKey, ExceptionState };
export { AGE_BUCKETS, EXCEPTION_STATES };

/** An exception as the page lists it (the row of `listExceptions`, src/db/exceptions.ts). */
export type ExceptionView = ExceptionListRow;

const amountText = (amount: string | null, currency: string | null) =>
  amount === null ? 'not reported' : `${amount} ${currency ?? ''}`.trim();

/** The facts cell: ids, intent and provider amounts, status and reason, the rule in one sentence. */
function factsCell(e: ExceptionView, ctx: PageContext): SafeHtml {
  const f = e.facts;
  const reason = f
    ? [f.statusReason, f.rejectionCode && `${f.rejectionCode} ${f.rejectionReason ?? ''}`.trim()]
        .filter(Boolean)
        .join(', ')
    : '';
  return html`${
    f
      ? html`<dl class="facts"><dt>Reference</dt><dd>${f.externalRef ?? 'none'}</dd>
<dt>Intent</dt><dd>${amountText(f.intentAmount, f.intentCurrency)}</dd>
<dt>Provider</dt><dd>${amountText(f.providerAmount, f.providerCurrency)}</dd>
<dt>Status</dt><dd>${f.status ?? 'none'}${reason ? ` (${reason})` : ''}</dd></dl><div class="rule">${f.rule}</div>`
      : ''
  }${
    e.reopenReason
      ? html`<div class="reopened">Reopened ${formatDateTime(e.reopenedAt ?? null, ctx.timeZone)} on a new fact: ${e.reopenReason}</div>`
      : ''
  }`;
}

export interface ExceptionFilter {
  type?: string;
  state?: ExceptionState;
  age?: AgeBucketKey;
}

export function exceptionsPage(
  ctx: PageContext,
  rows: readonly ExceptionView[],
  types: readonly string[],
  filter: ExceptionFilter,
  now: Date,
  notice: string | null,
): SafeHtml {
  const opt = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? raw(' selected') : ''}>${label}</option>`;
  return layout(
    { ...ctx, active: 'exceptions' },
    'Exceptions',
    html`<h1>Exceptions</h1>
${notice ? html`<div class="notice" role="status">${notice}</div>` : ''}
<form class="inline" method="get" action="${ctx.base}/exceptions">
<label>Type<select name="type">${opt('', 'All types', !filter.type)}${types.map((t) => opt(t, t, filter.type === t))}</select></label>
<label>State<select name="state">${opt('', 'Not resolved', !filter.state)}${EXCEPTION_STATES.map((s) =>
      opt(s, s, filter.state === s),
    )}</select></label>
<label>Age<select name="age">${opt('', 'Any age', !filter.age)}${AGE_BUCKETS.map((b) => opt(b.key, b.label, filter.age === b.key))}</select></label>
<button type="submit">Filter</button></form>
<table><thead><tr><th>Type</th><th>Entity</th><th>Account</th><th>Facts</th><th>Severity</th><th>State</th><th class="num">Seen</th><th>First seen</th><th>Age</th><th>Note</th><th>Action</th></tr></thead>
<tbody>${
      rows.length
        ? rows.map(
            (
              e,
            ) => html`<tr data-exception="${e.id}"><td>${e.type}</td><td>${e.kind} ${ctx.search ? html`<a href="${paymentHref(ctx, e.account, e.kind, e.entityId)}">${e.entityId}</a>` : e.entityId}</td><td>${e.account}</td><td>${factsCell(e, ctx)}</td><td>${e.severity}</td>
<td><span class="badge ${e.state}">${e.state}</span></td><td class="num">${e.count}</td>
<td class="when">${formatDateTime(e.firstSeenAt, ctx.timeZone)}</td><td class="when">${formatAge(now.getTime() - e.firstSeenAt.getTime())}</td>
<td>${e.note ?? ''}${e.actedBy ? html`<div class="muted">${e.actedBy}, ${formatDateTime(e.actedAt, ctx.timeZone)}</div>` : ''}${
              e.state !== 'resolved' && e.resolvedBy
                ? html`<div class="resolved-before">Resolved before by ${e.resolvedBy}${e.resolvedAt ? html`, ${formatDateTime(e.resolvedAt, ctx.timeZone)}` : ''}: ${e.resolutionNote ?? ''}</div>`
                : ''
            }</td>
<td>${
              e.state === 'resolved' || !ctx.role || !roleCan(ctx.role, 'work-exceptions')
                ? ''
                : html`<form class="inline" method="post" action="${ctx.base}/exceptions/${e.id}">
<input type="hidden" name="_csrf" value="${ctx.csrf}"><input name="note" placeholder="Note" aria-label="Note for ${e.type} ${e.entityId}" maxlength="1000">
${e.state === 'open' ? html`<button class="secondary" name="action" value="acknowledge">Acknowledge</button>` : ''}
${
  e.type === 'ILLEGAL_TRANSITION'
    ? html`<button name="action" value="accept-provider">Accept the provider's status</button>
<button class="secondary" name="action" value="keep-ledger">Keep the ledger's status</button>`
    : html`<button name="action" value="resolve">Resolve</button>`
}</form>`
            }</td></tr>`,
          )
        : html`<tr><td colspan="11" class="muted">No exceptions match.</td></tr>`
    }</tbody></table>`,
  );
}
