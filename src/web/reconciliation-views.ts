/**
 * The Reconciliation pages: the bank accounts with their latest day and what stays unmatched, and one
 * bank account's day (the statement's balances against the ledger's bank account and the reconciliation
 * that explains their difference, the matched share, the unmatched lines with a form to match each by
 * hand, the open settlements, the day's matches with a form to end each). Forms are offered to roles that
 * may work exceptions; the routes check again.
 */
import {
  type DayLine,
  type LineNotInLedger,
  NOT_IN_LEDGER_LISTED,
  type ReconciliationAccountRow,
  type ReconciliationDay,
} from '../db/read-models/reconciliation.ts';
import type { Minor } from '../domain/money.ts';
import { roleCan } from '../domain/roles.ts';
import { addDays, localDate, zonedTimeToInstant } from '../domain/zoned-time.ts';
import { BANK_PROOF_CSS, bankProofTable } from './bank-proof-view.ts';
import { formatDateTime, formatMoney, html, type SafeHtml } from './html.ts';
import { layout, type PageContext } from './views.ts';

export const RECONCILIATION_CSS = `
.recon-sums{display:grid;grid-template-columns:repeat(auto-fit,minmax(13rem,1fr));gap:.8rem;margin:.5rem 0 1rem}
.recon-sums div{background:#fff;padding:.6rem .9rem;box-shadow:0 1px 2px #0001}
.recon-sums dt{color:#46505f;font-size:.8rem;text-transform:uppercase;letter-spacing:.02em}
.recon-sums dd{margin:.2rem 0 0;font-size:1.15rem;font-variant-numeric:tabular-nums}
.recon-sums .off{color:#b3261e;font-weight:600}.recon-sums .even{color:#1b5e20}
.recon-sums dd.muted{font-size:.78rem;margin:0;overflow-wrap:break-word}
table#matches td.rulename,table#matches td.by{white-space:nowrap}table#matches td.members{min-width:16rem}
.daynav{display:flex;gap:1rem;margin:-.4rem 0 .8rem}
details.pick summary{cursor:pointer;color:#2456c7}
form.pick{display:flex;flex-direction:column;gap:.35rem;margin:.4rem 0;max-width:34rem}
form.pick fieldset{border:1px solid #e3e6eb;padding:.3rem .6rem;margin:0}
form.pick label.check{flex-direction:row;align-items:center;gap:.4rem;font-size:.85rem;color:#1d2430}
form.unmatch{display:flex;flex-wrap:wrap;gap:.4rem;align-items:end}form.unmatch input{width:11rem}
@media (max-width:1200px){.recon-sums{grid-template-columns:repeat(3,1fr)}table#matches td.members{min-width:12rem}}
td.members ul{margin:0;padding-left:1rem}
.recon-proof{display:flex;flex-wrap:wrap;gap:0 2rem;align-items:flex-start}
.recon-proof>table.bank-proof{flex:0 1 40rem}
.recon-proof>p{flex:1 1 18rem;margin:.5rem 0}
details.not-in-ledger summary{cursor:pointer;color:#2456c7;margin:.2rem 0}
.mark.carried{background:#fff1c2;color:#6b4e00}
ul.feed{margin:0 0 .8rem;padding-left:1.1rem}ul.feed li{margin:.15rem 0}
${BANK_PROOF_CSS}`;

const canWork = (ctx: PageContext) => ctx.role !== undefined && roleCan(ctx.role, 'work-exceptions');
const enc = encodeURIComponent;

export function dayPath(ctx: PageContext, bankAccount: string, date: string): string {
  return `${ctx.base}/reconciliation/${enc(bankAccount)}/${enc(date)}`;
}

const head = (ctx: PageContext) => html`<link rel="stylesheet" href="${ctx.base}/static/reconciliation.css">`;

function percent(part: bigint, whole: bigint): string {
  if (whole === 0n) return '-';
  const tenths = (part * 2000n + whole) / (2n * whole);
  return `${tenths / 10n}.${tenths % 10n}%`;
}

const money = (m: Minor | null) => (m === null ? 'none' : formatMoney(m));

/** Where the bank accounts and their statements come from, as the list says it. */
export interface BankFeed {
  /** `sandbox`: the embedded sandbox's bank accounts (PAYRECON_BANK_ACCOUNTS unset); else configured. */
  source: 'configured' | 'sandbox';
  /** The settlement fetch's cron expression, or null when no fetch is configured. */
  schedule: string | null;
  /** Its next fire time, or null. */
  nextRun: Date | null;
  /** Its last finished run (error null when it succeeded), or null. */
  lastRun: { finishedAt: Date; error: string | null } | null;
  /** The sandbox's clock and its account's time zone, when the statements come from a sandbox that answers. */
  sandbox: { now: Date; speed: number | null; timeZone: string } | null;
}

/** A cron expression as words where it is a plain interval. */
function scheduleText(cron: string): SafeHtml {
  if (cron === '* * * * *') return html`every minute`;
  const every = /^\*\/(\d+) \* \* \* \*$/.exec(cron);
  if (every) return html`every ${every[1]} minutes`;
  return html`on the schedule <code>${cron}</code> (PAYRECON_CRON_SETTLEMENT_FETCH)`;
}

/** Real minutes until the sandbox's current day ends, in words, or null without a real clock. */
function dayEndsIn(sandbox: NonNullable<BankFeed['sandbox']>): { day: string; within: string } | null {
  if (sandbox.speed === null) return null;
  const day = localDate(sandbox.now, sandbox.timeZone);
  const end = zonedTimeToInstant(addDays(day, 1), '00:00', sandbox.timeZone).getTime();
  const minutes = Math.ceil((end - sandbox.now.getTime()) / sandbox.speed / 60_000);
  return { day, within: minutes <= 1 ? 'within a minute' : `in about ${minutes} minutes` };
}

/** Where the bank accounts and their statements come from, and when the next ones come. */
function feedText(ctx: PageContext, feed: BankFeed, empty: boolean): SafeHtml {
  const items: SafeHtml[] = [];
  const ends = feed.sandbox ? dayEndsIn(feed.sandbox) : null;
  if (feed.source === 'sandbox') {
    items.push(
      html`<strong>Bank accounts:</strong> the sandbox's settlement accounts, one per currency it settles (PAYRECON_BANK_ACCOUNTS is not set).${
        empty
          ? html` None yet: the sandbox opens them with its first settlement, at the end of its first day${ends ? html` (${ends.within})` : ''}; the next fetch reads them.`
          : ''
      }`,
    );
  }
  if (feed.schedule !== null) {
    const last = feed.lastRun
      ? html`last ${formatDateTime(feed.lastRun.finishedAt, ctx.timeZone)}${feed.lastRun.error ? html` (failed: ${feed.lastRun.error})` : ''}`
      : html`not run yet`;
    const next = feed.nextRun ? html`, next ${formatDateTime(feed.nextRun, ctx.timeZone)}` : '';
    items.push(
      html`<strong>Statements:</strong> the settlement fetch imports them with the provider's reports ${scheduleText(feed.schedule)}, each day's once the day is over (${last}${next}).`,
    );
  }
  if (feed.sandbox) {
    const speed = feed.sandbox.speed === null ? '' : html`, ${feed.sandbox.speed}× real time`;
    items.push(
      html`<strong>Sandbox time:</strong> ${formatDateTime(feed.sandbox.now, feed.sandbox.timeZone)}${speed}${ends ? html`; its day ${ends.day} ends ${ends.within}` : ''}.`,
    );
  }
  return html`<ul class="muted feed" id="bank-feed">${items.map((i) => html`<li>${i}</li>`)}</ul>`;
}

export function reconciliationListPage(
  ctx: PageContext,
  rows: readonly ReconciliationAccountRow[],
  feed: BankFeed | null = null,
): SafeHtml {
  const emptyText =
    feed?.source === 'sandbox'
      ? html`No bank account yet (the sandbox's come with its first settlement).`
      : html`No bank account is configured (PAYRECON_BANK_ACCOUNTS).`;
  return layout(
    { ...ctx, active: 'reconciliation' },
    'Reconciliation',
    html`<h1>Reconciliation</h1>
<p class="muted">Each bank account's statement against the ledger's bank account, day by day.</p>
${feed ? feedText(ctx, feed, rows.length === 0) : ''}
<table id="bank-accounts"><thead><tr><th>Bank account</th><th>Name</th><th>Merchant account</th><th>Currency</th><th>Latest day</th><th class="num">Lines</th><th class="num">Unmatched lines</th><th class="num">Open settlements</th></tr></thead><tbody>${
      rows.length
        ? rows.map(
            (r) =>
              html`<tr data-bank="${r.bank.id}"><td>${r.latestDay ? html`<a href="${dayPath(ctx, r.bank.id, r.latestDay)}">${r.bank.id}</a>` : r.bank.id}</td><td>${r.bank.name}</td><td>${r.bank.account}</td><td>${r.bank.currency}</td><td class="when">${r.latestDay ?? html`<span class="muted">no statement yet</span>`}</td><td class="num">${r.lines}</td><td class="num">${r.unmatchedLines}</td><td class="num">${r.openSettlements}</td></tr>`,
          )
        : html`<tr><td colspan="8" class="muted">${emptyText}</td></tr>`
    }</tbody></table>`,
    head(ctx),
  );
}

/** Why a line the ledger lacks is listed, when it is not simply unmatched. */
function notInLedgerMark(l: LineNotInLedger): SafeHtml | string {
  if (l.counted > 1) {
    return html` <span class="mark">in the ledger ${l.counted} times by this day: matched again before an unmatch's reversal counts</span>`;
  }
  if (l.counted < 0) return html` <span class="mark">reversed more often than matched by this day</span>`;
  if (l.matchedNow) return html` <span class="mark">matched, not in the ledger by this day</span>`;
  return '';
}

/** The statement of the day, the first statement, and the lines not in the ledger of a day's proof. */
function dayProof(ctx: PageContext, day: ReconciliationDay): SafeHtml {
  const { bank, proof } = day;
  const first = proof.firstStatement;
  const listed = proof.notInLedger.lines;
  const more = proof.notInLedger.count - listed.length;
  return html`<h2>Bank reconciliation at the day's end</h2>
<div class="recon-proof">${bankProofTable({
    id: 'proof',
    statement:
      day.statement.closing === null
        ? 'no statement closes on this day'
        : `of the statement whose last line is booked on ${day.date}`,
    closing: day.statement.closing,
    ledgerLabel: `bank:${bank.id} at the day's end`,
    ledger: day.ledger,
    firstStatement: first
      ? `${first.statementId ?? `import ${first.importId}`}, first line booked ${first.date}`
      : null,
    openingBeforeFirst: first?.opening ?? null,
    linesLabel: 'Bank lines booked to date, not in the ledger',
    linesWhy: 'unmatched (rent, own transfers, credits not matched yet), listed below',
    lines: proof.notInLedger,
    unexplained: proof.unexplained,
  })}
<p class="muted">The ledger's bank account holds only the credits matched to settlements, since the first imported statement: what the account held before it and the bank lines no match covers are on the statement, not in the ledger. Settlements paid by the provider and not seen in the bank yet are in settlements in transit, not in the bank account: they are no part of this difference.</p></div>
<details class="not-in-ledger"${proof.notInLedger.count <= 25 ? html` open` : ''}><summary>Bank lines booked to date, not in the ledger: ${proof.notInLedger.count}, ${formatMoney(proof.notInLedger.total)} ${bank.currency}</summary>
<table id="not-in-ledger"><thead><tr><th>Booked</th><th>Reference</th><th>Description</th><th class="num">Age</th><th class="num">Not in the ledger</th></tr></thead><tbody>${
    listed.length
      ? listed.map(
          (l) =>
            html`<tr data-line="${l.identity}"><td class="when"><a href="${dayPath(ctx, bank.id, l.bookingDate)}">${l.bookingDate}</a></td><td>${l.reference ?? html`<span class="muted">none</span>`}${notInLedgerMark(l)}</td><td>${l.counterparty ? html`${l.counterparty}: ` : ''}${l.description ?? ''}</td><td class="num">${l.ageDays} d</td><td class="num${l.missing < 0n ? ' neg' : ''}">${formatMoney(l.missing)}</td></tr>`,
        )
      : html`<tr><td colspan="5" class="muted">None: the ledger holds every line booked to date.</td></tr>`
  }</tbody>${
    more > 0
      ? html`<tfoot><tr><td colspan="5" class="muted">The latest ${NOT_IN_LEDGER_LISTED} of ${proof.notInLedger.count} are listed; the total counts them all.</td></tr></tfoot>`
      : ''
  }</table></details>`;
}

function lineText(l: DayLine): string {
  return l.reference ?? l.description ?? l.identity.slice(0, 12);
}

function matchForm(ctx: PageContext, day: ReconciliationDay, line: DayLine): SafeHtml {
  const others = day.unmatched.filter((l) => l.identity !== line.identity && l.amount > 0n);
  return html`<details class="pick"><summary>Match by hand</summary>
<form class="pick" method="post" action="${dayPath(ctx, day.bank.id, day.date)}/match">
<input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="lines" value="${line.identity}">
<fieldset><legend class="muted">Settlements</legend>${
    day.openSettlements.length
      ? day.openSettlements.map(
          (s) =>
            html`<label class="check"><input type="checkbox" name="with" value="${s.identity}"> ${s.settlementId} · ${formatMoney(s.net)} ${s.currency} · value ${s.valueDate}</label>`,
        )
      : html`<span class="muted">No open settlement.</span>`
  }</fieldset>${
    others.length
      ? html`<fieldset><legend class="muted">With other lines of the day</legend>${others.map(
          (o) =>
            html`<label class="check"><input type="checkbox" name="lines" value="${o.identity}"> ${lineText(o)} · ${formatMoney(o.amount)}</label>`,
        )}</fieldset>`
      : ''
  }
<label>Note (required: why)<input name="note" maxlength="1000" required></label>
<div><button type="submit">Match</button></div></form></details>`;
}

export function reconciliationDayPage(
  ctx: PageContext,
  day: ReconciliationDay,
  notice: string | null,
): SafeHtml {
  const work = canWork(ctx);
  const { bank, share } = day;
  const unexplained = day.proof.unexplained;
  // Unmatched lines the ledger still holds at the day's end (a match ended after the day): the day's lines
  // are the latest booked, so every one the ledger lacks is among those listed.
  const lacking = new Set(day.proof.notInLedger.lines.map((l) => l.identity));
  const carried = new Set(day.unmatched.filter((l) => !lacking.has(l.identity)).map((l) => l.identity));
  const { opening, closing } = day.statement;
  const moved = opening === null || closing === null ? null : closing - opening;
  return layout(
    { ...ctx, active: 'reconciliation' },
    `Reconciliation ${bank.id} ${day.date}`,
    html`<h1>${bank.name} <span class="muted">${bank.id} · ${bank.currency} · ${day.date}</span></h1>
<nav class="daynav">${
      day.previous
        ? html`<a id="previous-day" href="${dayPath(ctx, bank.id, day.previous)}">← ${day.previous}</a>`
        : ''
    }<a href="${ctx.base}/reconciliation">All bank accounts</a>${
      day.next ? html`<a id="next-day" href="${dayPath(ctx, bank.id, day.next)}">${day.next} →</a>` : ''
    }</nav>
${notice ? html`<div class="notice" role="status">${notice}</div>` : ''}
<dl class="recon-sums" id="sums">
<div><dt>Statement opening</dt><dd id="opening">${money(day.statement.opening)}</dd></div>
<div><dt>Statement closing</dt><dd id="closing">${money(day.statement.closing)}</dd></div>
<div><dt>Ledger at day end</dt><dd id="ledger">${formatMoney(day.ledger)}</dd><dd class="muted">bank:<wbr>${bank.id}</dd></div>
<div><dt>Unexplained</dt><dd id="unexplained" class="${unexplained === null ? '' : unexplained === 0n ? 'even' : 'off'}">${unexplained === null ? 'unknown' : formatMoney(unexplained)}</dd><dd class="muted">of the difference <span id="difference">${money(day.difference)}</span>, once the reconciling items below are taken out</dd></div>
<div><dt>Moved on the day</dt><dd id="moved">${moved === null ? 'no statement' : formatMoney(moved)}</dd><dd class="muted">statement; ledger ${formatMoney(day.ledger - day.ledgerOpening)}</dd></div>
<div><dt>Matched</dt><dd id="share-lines">${share.matchedLines} of ${share.lines} lines (${percent(BigInt(share.matchedLines), BigInt(share.lines))})</dd><dd class="muted" id="share-amount">${formatMoney(share.matchedAmount)} of ${formatMoney(share.amount)} (${percent(share.matchedAmount, share.amount)})</dd></div>
</dl>
<p class="muted">Amounts in ${bank.currency}. The ledger counts each entry on its effect day: a matched credit on its line's booking date, however late it was matched.</p>
${dayProof(ctx, day)}
<h2>Unmatched lines</h2>
<table id="unmatched"><thead><tr><th>Reference</th><th>Booked</th><th>Value</th><th class="num">Amount</th><th class="num">Age</th><th>Description</th>${work ? html`<th>Match</th>` : ''}</tr></thead><tbody>${
      day.unmatched.length
        ? day.unmatched.map(
            (l) =>
              html`<tr data-line="${l.identity}"><td>${l.reference ?? html`<span class="muted">none</span>`}${l.reversal ? html` <span class="mark">reversal</span>` : ''}${carried.has(l.identity) ? html` <span class="mark carried">in the ledger on this day: its unmatch counts from the day it was made</span>` : ''}</td><td class="when">${l.bookingDate}</td><td class="when">${l.valueDate ?? ''}</td><td class="num${l.amount < 0n ? ' neg' : ''}">${formatMoney(l.amount)}</td><td class="num">${l.ageDays} d</td><td>${l.counterparty ? html`${l.counterparty}: ` : ''}${l.description ?? ''}</td>${work ? html`<td>${matchForm(ctx, day, l)}</td>` : ''}</tr>`,
          )
        : html`<tr><td colspan="${work ? 7 : 6}" class="muted">Every line of the day is matched.</td></tr>`
    }</tbody></table>
<h2>Settlements in transit, not matched</h2>
<p class="muted">Paid by the provider, not seen in the bank yet: in the ledger's settlements in transit, not in its bank account.</p>
<table id="open-settlements" class="narrow"><thead><tr><th>Settlement</th><th>Value date</th><th class="num">Net</th><th>Bank reference</th><th class="num">Age</th></tr></thead><tbody>${
      day.openSettlements.length
        ? day.openSettlements.map(
            (s) =>
              html`<tr data-settlement="${s.settlementId}"><td>${s.settlementId}</td><td>${s.valueDate}</td><td class="num">${formatMoney(s.net)} ${s.currency}</td><td>${s.bankReference ?? ''}</td><td class="num">${s.ageDays} d</td></tr>`,
          )
        : html`<tr><td colspan="5" class="muted">None up to this day.</td></tr>`
    }</tbody></table>
<h2>Matches of the day</h2>
<table id="matches"><thead><tr><th>Match</th><th>Rule</th><th>Lines and settlements</th><th class="num">Difference</th><th>By</th><th>Note</th>${work ? html`<th>Unmatch</th>` : ''}</tr></thead><tbody>${
      day.matches.length
        ? day.matches.map(
            (m) =>
              html`<tr data-match="${m.id}"><td>${m.id}</td><td class="rulename">${m.rule}</td><td class="members"><ul>${m.members.map(
                (x) =>
                  html`<li>${x.side === 'bank_line' ? 'line' : x.side} ${x.label}${x.amount === null ? '' : html` · ${formatMoney(x.amount)}`}</li>`,
              )}</ul></td><td class="num">${formatMoney(m.difference)}</td><td class="by">${m.createdBy}<br><span class="muted">${formatDateTime(m.createdAt, ctx.timeZone)}</span></td><td>${m.note ?? ''}</td>${
                work
                  ? html`<td><form class="unmatch" method="post" action="${dayPath(ctx, bank.id, day.date)}/unmatch"><input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="match" value="${m.id}"><label>Note (why)<input name="note" maxlength="1000" required></label><button class="secondary" type="submit">Unmatch</button></form></td>`
                  : ''
              }</tr>`,
          )
        : html`<tr><td colspan="${work ? 7 : 6}" class="muted">No line of the day is matched.</td></tr>`
    }</tbody></table>
${work ? '' : html`<p class="muted">Your role can read the reconciliation but not match or unmatch.</p>`}`,
    head(ctx),
  );
}
