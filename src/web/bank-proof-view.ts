/**
 * The bank reconciliation table of the Reconciliation page's day and of the month close's bank proof
 * (src/domain/bank-reconciliation.ts): the statement's closing balance against the ledger's bank account,
 * their difference, the reconciling items that explain it (the balance before the first imported
 * statement, the bank lines not in the ledger), and the unexplained difference, green at 0.00 and red
 * otherwise (no other figure is coloured: a difference is not an error until it is unexplained). Cells are named `<id>-closing`, `-ledger`, `-difference`, `-opening-before`, `-lines`,
 * `-unexplained`.
 */
import type { Minor } from '../domain/money.ts';
import { formatMoney, html, type SafeHtml } from './html.ts';

/** Rules of the table, part of each page's style sheet that shows it. */
export const BANK_PROOF_CSS = `
table.bank-proof{width:auto;min-width:min(36rem,100%)}
table.bank-proof caption{text-align:left;font-weight:600;padding:.3rem 0}
table.bank-proof th{text-align:left;font-weight:normal;color:#1d2430;text-transform:none;letter-spacing:normal;font-size:.92rem;background:#fff}
table.bank-proof .why{display:block;font-size:.8rem;color:#6b7483;font-weight:normal}
table.bank-proof tr.group th{color:#46505f;font-size:.8rem;text-transform:uppercase;letter-spacing:.02em;background:#f7f8fa;padding-top:.5rem}
table.bank-proof tr.item th{padding-left:1.6rem}
table.bank-proof tr.sum th,table.bank-proof tr.sum td{font-weight:600;border-top:2px solid #c9ced6}
table.bank-proof td.num{min-width:9rem;vertical-align:middle}
table.bank-proof td.even{color:#1b5e20}table.bank-proof td.off{color:#b3261e}`;

export interface BankProofRows {
  /** The table's id, and the prefix of its cells' ids. */
  id: string;
  caption?: SafeHtml | string;
  /** The statement whose closing balance is reconciled ("S-0930 of 2026-09-29"), or why none. */
  statement: SafeHtml | string;
  closing: Minor | null;
  /** "bank:<id> at the day's end", "bank:<id> at the cut-off". */
  ledgerLabel: string;
  ledger: Minor;
  /** The first imported statement ("S-0301, first line booked 2026-03-02"), or null when none. */
  firstStatement: string | null;
  openingBeforeFirst: Minor | null;
  /** "Bank lines booked to date, not in the ledger", with what says which ones. */
  linesLabel: string;
  linesWhy: SafeHtml | string;
  lines: { count: number; total: Minor };
  unexplained: Minor | null;
}

/** An amount cell; no colour for a sign: only the unexplained difference is coloured, by `cls`. */
const cell = (id: string, m: Minor | null, cls = '') =>
  m === null
    ? html`<td class="num muted" id="${id}">unknown</td>`
    : html`<td class="num${cls ? ` ${cls}` : ''}" id="${id}">${formatMoney(m)}</td>`;

/** Why the unexplained difference cannot be computed, or null. */
function unknownWhy(r: BankProofRows): string | null {
  if (r.closing === null) return 'no statement closing balance to reconcile';
  if (r.firstStatement === null) return 'no first statement';
  if (r.openingBeforeFirst === null) return 'the first statement gives no opening balance';
  return null;
}

export function bankProofTable(r: BankProofRows): SafeHtml {
  const difference = r.closing === null ? null : r.closing - r.ledger;
  const why = unknownWhy(r);
  const state = r.unexplained === null ? '' : r.unexplained === 0n ? 'even' : 'off';
  return html`<table class="bank-proof" id="${r.id}">${r.caption ? html`<caption>${r.caption}</caption>` : ''}<tbody>
<tr><th>Statement closing balance<span class="why">${r.statement}</span></th>${cell(`${r.id}-closing`, r.closing)}</tr>
<tr><th>Ledger ${r.ledgerLabel}</th>${cell(`${r.id}-ledger`, r.ledger)}</tr>
<tr class="sum"><th>Difference<span class="why">statement closing balance less ledger</span></th>${cell(`${r.id}-difference`, difference)}</tr>
<tr class="group"><th colspan="2">Explained by</th></tr>
<tr class="item"><th>Balance before the first imported statement<span class="why">${r.firstStatement === null ? 'no statement imported' : `the opening balance of ${r.firstStatement}`}</span></th>${cell(`${r.id}-opening-before`, r.openingBeforeFirst)}</tr>
<tr class="item"><th>${r.linesLabel} (${r.lines.count})<span class="why">${r.linesWhy}</span></th>${cell(`${r.id}-lines`, r.lines.total)}</tr>
<tr class="sum"><th>Unexplained difference<span class="why">${why ?? (r.unexplained === 0n ? 'every line is accounted for' : 'the difference less the items above: a ledger entry off, a missing statement, or a balance its lines do not make')}</span></th>${cell(`${r.id}-unexplained`, r.unexplained, state)}</tr>
</tbody></table>`;
}
