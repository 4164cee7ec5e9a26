/**
 * The payment pages: the search box's answer and one payment with the merchant's intent, the provider's
 * latest view (with the reason of a rejection or cancellation and, for a deposit paid with another
 * amount, what the customer paid), the ledger's postings, the settlements its money went in or out in, a
 * deposit's refunds, the status history, its exceptions and alerts. Routes in src/web/app.ts; the layout in views.ts.
 */
import type { PaymentDetail, PaymentRow } from '../db/read-models/payments.ts';
import type { Minor } from '../domain/money.ts';
import { paymentPath } from '../domain/payment-path.ts';
import { codeText, formatDateTime, formatMoney, html, type SafeHtml } from './html.ts';
import { layout, type PageContext } from './views.ts';

export type PaymentView = PaymentRow;
export type PaymentDetailView = PaymentDetail;

/** The link to a payment's page. */
export function paymentHref(ctx: PageContext, account: string, kind: string, entityId: string): string {
  return `${ctx.base}${paymentPath(account, kind, entityId)}`;
}

const moneyText = (amount: Minor | null, currency: string | null) =>
  amount === null ? 'not reported' : `${formatMoney(amount)} ${currency ?? ''}`.trim();

function money(minor: Minor): SafeHtml {
  return html`<td class="num${minor < 0n ? ' neg' : ''}">${formatMoney(minor)}</td>`;
}

/** What a deposit's invoice id, a cashout's external id and a refund's reference are called. */
const REF_LABEL: Record<PaymentRow['kind'], string> = {
  deposit: 'Invoice',
  cashout: 'External id',
  refund: 'Reference',
};

const KIND_TITLE: Record<PaymentRow['kind'], string> = {
  deposit: 'Deposit',
  cashout: 'Cashout',
  refund: 'Refund',
};

/** The provider's reason for a status: a deposit's status reason, a cashout's rejection code and text. */
function reasonText(r: {
  statusReason: string | null;
  rejectionCode: string | null;
  rejectionReason: string | null;
}): string {
  // A no-break space keeps the bank's code with the first word of its text.
  const rejection = [r.rejectionCode, r.rejectionReason].filter(Boolean).join('\u00a0');
  const status = r.statusReason && r.statusReason !== r.rejectionReason ? r.statusReason : '';
  return [status, rejection].filter(Boolean).join(' · ');
}

export function paymentSearchPage(ctx: PageContext, q: string, rows: readonly PaymentView[]): SafeHtml {
  return layout(
    ctx,
    'Find a payment',
    html`<h1>Find a payment</h1>
<form class="inline" method="get" action="${ctx.base}/payments"><label>Any id (deposit, invoice, cashout, external, refund, intent, bank reference)<input name="q" value="${q}" required></label><button type="submit">Find</button></form>
${
  q && rows.length === 0
    ? html`<div class="notice error" role="alert">No payment has the id ${q}.</div>`
    : rows.length
      ? html`<table><thead><tr><th>Account</th><th>Kind</th><th>Id</th><th>Invoice or external id</th><th>Status</th><th class="num">Amount</th></tr></thead><tbody>${rows.map(
          (r) =>
            html`<tr><td>${r.merchantAccount}</td><td>${r.kind}</td><td><a href="${paymentHref(ctx, r.merchantAccount, r.kind, r.entityId)}">${r.entityId}</a></td><td>${r.externalRef ?? ''}</td><td>${r.status ?? ''}</td><td class="num">${moneyText(r.amount, r.currency)}</td></tr>`,
        )}</tbody></table>`
      : ''
}`,
  );
}

/**
 * The settlements the payment's money went in or out in, as the provider's transactions report names them
 * (a move after a settlement is in the next one), each with its report row when imported: value date,
 * bank reference, what it paid out, whether the ledger booked it and the bank line matched to it.
 */
function settlementsSection(d: PaymentDetailView): SafeHtml {
  return html`<h2>Settlement</h2>${
    d.settlements.length
      ? html`<table class="narrow" id="settlements"><thead><tr><th>Settlement</th><th>Reported as</th><th class="num">Net in it</th><th>Value date</th><th>Bank reference</th><th class="num">Settlement net</th><th>Booked</th><th>Bank line</th></tr></thead><tbody>${d.settlements.map(
          (s) =>
            html`<tr data-settlement="${s.settlementId}"><td>${s.settlementId}</td><td>${s.status}</td><td class="num">${moneyText(s.net, s.currency)}</td>${
              s.settlement
                ? html`<td>${s.settlement.valueDate}</td><td>${s.settlement.bankReference ?? ''}</td><td class="num">${moneyText(s.settlement.net, s.settlement.settlementCurrency)}</td><td>${s.settlement.booked ? 'yes' : 'no'}</td><td>${
                    s.settlement.bankLine
                      ? `${s.settlement.bankLine.bookingDate} ${s.settlement.bankLine.reference ?? ''}`.trim()
                      : html`<span class="muted">not matched</span>`
                  }</td>`
                : html`<td colspan="5" class="muted">not in an imported settlement report</td>`
            }</tr>`,
        )}</tbody></table>`
      : html`<p class="muted" id="settlements">In no imported transactions report with a settlement.</p>`
  }`;
}

/** A deposit's refunds with links, and the total of those completed per currency. */
function refundsSection(ctx: PageContext, d: PaymentDetailView): SafeHtml {
  const p = d.payment;
  if (p.kind !== 'deposit') return html``;
  const whole = (currency: string, total: Minor) =>
    p.amount !== null && currency === p.currency && total === p.amount ? ', the whole deposit' : '';
  const completed = new Map<string, Minor>();
  for (const r of d.refunds) {
    if (r.status !== 'COMPLETED' || r.amount === null) continue;
    const c = r.currency ?? '';
    completed.set(c, (completed.get(c) ?? 0n) + r.amount);
  }
  return html`<h2>Refunds</h2>${
    d.refunds.length
      ? html`<table class="narrow" id="refunds"><thead><tr><th>Refund</th><th>Status</th><th>Since</th><th class="num">Amount</th></tr></thead><tbody>${d.refunds.map(
          (r) =>
            html`<tr data-refund="${r.entityId}"><td><a href="${paymentHref(ctx, p.merchantAccount, 'refund', r.entityId)}">${r.entityId}</a></td><td>${r.status ?? 'awaiting status'}</td><td class="when">${formatDateTime(r.statusSince, ctx.timeZone)}</td><td class="num">${moneyText(r.amount, r.currency)}</td></tr>`,
        )}</tbody><tfoot>${
          completed.size
            ? [...completed].map(
                ([c, total]) =>
                  html`<tr class="total"><th colspan="3">Refunded (completed${whole(c, total)})</th><td class="num">${moneyText(total, c || null)}</td></tr>`,
              )
            : html`<tr class="total"><th colspan="3">Refunded (completed)</th><td class="num">none yet</td></tr>`
        }</tfoot></table>`
      : html`<p class="muted" id="refunds">No refunds.</p>`
  }`;
}

export function paymentPage(ctx: PageContext, d: PaymentDetailView): SafeHtml {
  const p = d.payment;
  const when = (date: Date | null) => formatDateTime(date, ctx.timeZone);
  const reason = reasonText(p);
  const mismatch = p.kind === 'deposit' && p.statusReason === 'AMOUNT_MISMATCH';
  return layout(
    ctx,
    `${p.kind} ${p.entityId}`,
    html`<h1>${KIND_TITLE[p.kind]} ${p.entityId} <span class="muted">${p.merchantAccount}${p.test ? ' · test' : ''}${p.crypto ? ' · crypto' : ''}</span></h1>
<div class="sides">
<section id="intent"><h2>The merchant's intent</h2>${
      d.intent
        ? html`<dl><dt>Intent</dt><dd>${d.intent.intentId}</dd><dt>Operation</dt><dd>${d.intent.operation}</dd><dt>Amount</dt><dd>${moneyText(d.intent.amount, d.intent.currency)}</dd><dt>Outcome</dt><dd>${d.intent.outcome}</dd><dt>Created</dt><dd>${when(d.intent.createdAt)}</dd></dl>`
        : html`<p class="muted">No intent recorded.</p>`
    }</section>
<section id="provider"><h2>The provider's latest view</h2><dl><dt>Status</dt><dd id="status">${p.status ?? 'awaiting status'}</dd>
${reason ? html`<dt>Reason</dt><dd id="reason">${codeText(reason)}</dd>` : ''}
<dt>Since</dt><dd>${when(p.statusSince)}</dd><dt>Amount${mismatch ? ' asked' : ''}</dt><dd>${moneyText(p.amount, p.currency)}</dd>
${
  mismatch || d.paid
    ? html`<dt>Paid by the customer</dt><dd id="paid">${d.paid ? moneyText(d.paid.amount, d.paid.currency ?? p.currency) : "not in the provider's answer: look it up in its back office"}</dd>`
    : ''
}
${p.feeAmount !== null ? html`<dt>Fee</dt><dd>${moneyText(p.feeAmount, p.feeCurrency)}</dd>` : ''}
<dt>${REF_LABEL[p.kind]}</dt><dd id="reference">${p.externalRef ?? 'none'}</dd>${p.kind === 'cashout' || p.bankReference ? html`<dt>Bank reference</dt><dd id="bank-reference">${p.bankReference ?? 'none yet'}</dd>` : ''}${p.parentDepositId ? html`<dt>Deposit</dt><dd><a href="${paymentHref(ctx, p.merchantAccount, 'deposit', p.parentDepositId)}">${p.parentDepositId}</a></dd>` : ''}
<dt>Last seen</dt><dd>${when(p.lastSeenAt)}</dd></dl></section>
<section id="ledger"><h2>The ledger</h2>${
      d.entries.length
        ? html`<table class="narrow"><thead><tr><th>Effect</th><th>Book</th><th>Posting</th><th class="num">Amount</th></tr></thead><tbody>${d.entries.map(
            (e) =>
              html`${e.postings.map(
                (post, i) =>
                  html`<tr>${i === 0 ? html`<td rowspan="${e.postings.length}">${e.effect}${e.direction < 0 ? ' (reversal)' : ''}<div class="muted">${when(e.bookedAt)}</div>${e.decision ? html`<div class="decision">decided by ${e.decision.by}${e.decision.proposedBy ? ` on ${e.decision.proposedBy}'s proposal` : ''} (exception <a href="${ctx.base}/exceptions/${e.decision.exceptionId}">#${e.decision.exceptionId}</a>, ${e.decision.decision}): ${e.decision.note}</div>` : ''}</td><td rowspan="${e.postings.length}">${e.book}</td>` : ''}<td>${post.account}</td>${money(post.amount)}</tr>`,
              )}`,
          )}</tbody></table>`
        : html`<p class="muted">Nothing booked.</p>`
    }</section>
</div>
${settlementsSection(d)}
${refundsSection(ctx, d)}
<h2>Status history</h2>
<table><thead><tr><th>Observed</th><th>Source</th><th>From</th><th>To</th><th class="num">Amount</th><th>Reason</th><th>Marks</th></tr></thead><tbody>${
      d.history.length
        ? d.history.map(
            (h) =>
              html`<tr><td class="when">${when(h.observedAt)}</td><td>${h.source}</td><td>${h.fromStatus ?? ''}</td><td>${h.toStatus ?? ''}</td><td class="num">${moneyText(h.amount, h.currency)}</td><td>${codeText(reasonText(h))}</td><td>${h.stale ? html`<span class="mark">stale</span> ` : ''}${h.illegal ? html`<span class="mark">illegal</span>` : ''}</td></tr>`,
          )
        : html`<tr><td colspan="7" class="muted">No observations.</td></tr>`
    }</tbody></table>
<h2>Exceptions</h2>${
      d.exceptions.length
        ? html`<ul>${d.exceptions.map((e) => html`<li><a href="${ctx.base}/exceptions/${e.id}">${e.type}</a> · ${e.severity} · <span class="badge ${e.state}">${e.state}</span></li>`)}</ul>`
        : html`<p class="muted">None.</p>`
    }
<h2>Alerts</h2>${
      d.alerts.length
        ? html`<ul>${d.alerts.map((a) => html`<li>${a.type} · ${a.severity} · raised ${when(a.raisedAt)}${a.deliveredTo.length ? ` · sent to ${a.deliveredTo.join(', ')}` : ''}</li>`)}</ul>`
        : html`<p class="muted">None.</p>`
    }`,
  );
}
