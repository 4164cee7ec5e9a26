/**
 * The merchant's bank statement of a settlement account for one local day, as a bank gives it: ISO
 * 20022 camt.053 (versions 001.02 and 001.08: one `Stmt` per bank account, opening and closing booked
 * balances, every booked entry with its transactions) and a bank CSV. The XML is built from elements
 * whose text and attribute values are escaped here, so names such as `Smith & Sons <Unit 4>` stay data.
 */
import { formatAmount, type Minor } from '../domain/money.ts';
import type { BankAccountInfo, BankEntry } from './settlements.ts';

export interface DayStatement {
  bankAccount: BankAccountInfo;
  date: string;
  /** Booked balance at the start of the day. */
  opening: Minor;
  closing: Minor;
  entries: BankEntry[];
  /** Sequence number of the statement (days since the account was opened, from 1). */
  sequence: number;
}

export type CamtVersion = 'camt.053.001.02' | 'camt.053.001.08';

export const CAMT_VERSIONS: readonly CamtVersion[] = ['camt.053.001.02', 'camt.053.001.08'];

/** Balance and entries of `bankAccount` on `date`, from every entry the bank has booked. */
export function dayStatement(
  bankAccount: BankAccountInfo,
  entries: Iterable<BankEntry>,
  date: string,
): DayStatement {
  let opening = bankAccount.opening;
  const today: BankEntry[] = [];
  for (const e of entries) {
    if (e.bankAccount !== bankAccount.id) continue;
    if (e.bookingDate < date) opening += e.amount;
    else if (e.bookingDate === date) today.push(e);
  }
  today.sort((a, b) => a.seq - b.seq);
  const closing = today.reduce((s, e) => s + e.amount, opening);
  const days = Math.round(
    (Date.parse(`${date}T00:00:00Z`) - Date.parse(`${bankAccount.opened}T00:00:00Z`)) / 86_400_000,
  );
  return { bankAccount, date, opening, closing, entries: today, sequence: Math.max(1, days + 1) };
}

const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

export function escapeXml(text: string): string {
  // Characters XML 1.0 cannot carry at all are dropped rather than written.
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    .replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!);
}

type Node = string | XmlElement;
interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: Node[];
}

function el(name: string, children: Node | Node[] | null, attrs: Record<string, string> = {}): XmlElement {
  return { name, attrs, children: children === null ? [] : Array.isArray(children) ? children : [children] };
}

function render(node: XmlElement, depth: number, out: string[]): void {
  const pad = '  '.repeat(depth);
  const attrs = Object.entries(node.attrs)
    .map(([k, v]) => ` ${k}="${escapeXml(v)}"`)
    .join('');
  if (node.children.length === 1 && typeof node.children[0] === 'string') {
    out.push(`${pad}<${node.name}${attrs}>${escapeXml(node.children[0])}</${node.name}>`);
    return;
  }
  out.push(`${pad}<${node.name}${attrs}>`);
  for (const c of node.children) {
    if (typeof c === 'string') out.push(`${pad}  ${escapeXml(c)}`);
    else render(c, depth + 1, out);
  }
  out.push(`${pad}</${node.name}>`);
}

const abs = (m: Minor): Minor => (m < 0n ? -m : m);
const sign = (m: Minor): string => (m < 0n ? 'DBIT' : 'CRDT');
const amt = (name: string, m: Minor, ccy: string) => el(name, formatAmount(abs(m)), { Ccy: ccy });

/** True for an IBAN with valid check digits (ISO 13616, mod 97). */
export function isIban(id: string): boolean {
  if (!/^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$/.test(id)) return false;
  const numeric = (id.slice(4) + id.slice(0, 4)).replace(/[A-Z]/g, (c) => String(c.charCodeAt(0) - 55));
  return BigInt(numeric) % 97n === 1n;
}

export interface CamtOptions {
  version: CamtVersion;
  /** Sandbox time the file is produced, ms. */
  createdAt: number;
  ownerName: string;
  bic?: string;
}

function balance(code: string, value: Minor, ccy: string, date: string): XmlElement {
  return el('Bal', [
    el('Tp', el('CdOrPrtry', el('Cd', code))),
    amt('Amt', value, ccy),
    el('CdtDbtInd', sign(value)),
    el('Dt', el('Dt', date)),
  ]);
}

function party(v08: boolean, role: 'Dbtr' | 'Cdtr', name: string): XmlElement {
  return v08 ? el(role, el('Pty', el('Nm', name))) : el(role, el('Nm', name));
}

function entryXml(e: BankEntry, v08: boolean): XmlElement {
  const ccy = e.currency;
  const credit = e.amount >= 0n;
  const children: Node[] = [amt('Amt', e.amount, ccy), el('CdtDbtInd', sign(e.amount))];
  if (e.reversal) children.push(el('RvslInd', 'true'));
  children.push(
    v08 ? el('Sts', el('Cd', 'BOOK')) : el('Sts', 'BOOK'),
    el('BookgDt', el('Dt', e.bookingDate)),
    el('ValDt', el('Dt', e.valueDate)),
    el('AcctSvcrRef', e.ref),
    el(
      'BkTxCd',
      el('Domn', [
        el('Cd', 'PMNT'),
        el('Fmly', [el('Cd', credit ? 'RCDT' : 'ICDT'), el('SubFmlyCd', e.reversal ? 'RRTN' : 'ESCT')]),
      ]),
    ),
  );
  if (e.fee > 0n) {
    children.push(
      v08
        ? el('Chrgs', [
            amt('TtlChrgsAndTaxAmt', e.fee, ccy),
            el('Rcrd', [amt('Amt', e.fee, ccy), el('CdtDbtInd', 'DBIT'), el('ChrgInclInd', 'true')]),
          ])
        : el('Chrgs', [amt('Amt', e.fee, ccy), el('CdtDbtInd', 'DBIT')]),
    );
  }
  const details: Node[] = [];
  if (e.txs.length > 1) details.push(el('Btch', el('NbOfTxs', String(e.txs.length))));
  for (const t of e.txs) {
    const tx: Node[] = [el('Refs', [el('AcctSvcrRef', e.ref), el('EndToEndId', t.endToEndId)])];
    if (v08) tx.push(amt('Amt', t.amount, ccy), el('CdtDbtInd', sign(e.amount)));
    tx.push(el('AmtDtls', el('TxAmt', amt('Amt', t.amount, ccy))));
    tx.push(el('RltdPties', party(v08, credit ? 'Dbtr' : 'Cdtr', e.counterparty)));
    tx.push(el('RmtInf', el('Ustrd', t.remittance)));
    if (e.reversal) tx.push(el('RtrInf', el('Rsn', el('Cd', 'AC04'))));
    details.push(el('TxDtls', tx));
  }
  children.push(el('NtryDtls', details));
  return el('Ntry', children);
}

function summary(entries: BankEntry[]): XmlElement {
  const credits = entries.filter((e) => e.amount >= 0n);
  const debits = entries.filter((e) => e.amount < 0n);
  const total = (xs: BankEntry[]) => formatAmount(abs(xs.reduce((s, e) => s + e.amount, 0n)));
  return el('TxsSummry', [
    el('TtlNtries', el('NbOfNtries', String(entries.length))),
    el('TtlCdtNtries', [el('NbOfNtries', String(credits.length)), el('Sum', total(credits))]),
    el('TtlDbtNtries', [el('NbOfNtries', String(debits.length)), el('Sum', total(debits))]),
  ]);
}

/** A camt.053 document with one `Stmt` per statement given. */
export function camt053(statements: DayStatement[], options: CamtOptions): string {
  const v08 = options.version === 'camt.053.001.08';
  const created = `${new Date(options.createdAt).toISOString().slice(0, 19)}Z`;
  const bic = options.bic ?? 'SBOXNL2A';
  const first = statements[0];
  const msgId = `STMT-${first ? first.date.replaceAll('-', '') : 'EMPTY'}-${options.createdAt}`;
  const stmts = statements.map((s) => {
    const ccy = s.bankAccount.currency;
    const id = isIban(s.bankAccount.id)
      ? el('IBAN', s.bankAccount.id)
      : el('Othr', el('Id', s.bankAccount.id));
    return el('Stmt', [
      el('Id', `${s.bankAccount.id}-${s.date}`),
      el('ElctrncSeqNb', String(s.sequence)),
      el('CreDtTm', created),
      el('FrToDt', [el('FrDtTm', `${s.date}T00:00:00`), el('ToDtTm', `${s.date}T23:59:59`)]),
      el('Acct', [
        el('Id', id),
        el('Ccy', ccy),
        el('Ownr', el('Nm', options.ownerName)),
        el('Svcr', el('FinInstnId', el(v08 ? 'BICFI' : 'BIC', bic))),
      ]),
      balance('OPBD', s.opening, ccy, s.date),
      balance('CLBD', s.closing, ccy, s.date),
      summary(s.entries),
      ...s.entries.map((e) => entryXml(e, v08)),
    ]);
  });
  const doc = el(
    'Document',
    el('BkToCstmrStmt', [el('GrpHdr', [el('MsgId', msgId), el('CreDtTm', created)]), ...stmts]),
    { xmlns: `urn:iso:std:iso:20022:tech:xsd:${options.version}` },
  );
  const out = ['<?xml version="1.0" encoding="UTF-8"?>'];
  render(doc, 0, out);
  return `${out.join('\n')}\n`;
}

/** RFC 4180 field: quoted when it holds a comma, quote or line break. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

export function csvText(header: readonly string[], rows: readonly string[][]): string {
  return [header, ...rows].map((r) => `${r.map(csvField).join(',')}\n`).join('');
}

export const BANK_CSV_COLUMNS = [
  'booking_date',
  'value_date',
  'amount',
  'currency',
  'reference',
  'end_to_end_id',
  'counterparty',
  'description',
  'balance_after',
] as const;

/** The bank CSV of the statements: one line per entry, the balance after each. */
export function bankCsv(statements: DayStatement[]): string {
  const rows: string[][] = [];
  for (const s of statements) {
    let running = s.opening;
    for (const e of s.entries) {
      running += e.amount;
      rows.push([
        e.bookingDate,
        e.valueDate,
        formatAmount(e.amount),
        e.currency,
        e.ref,
        e.txs.map((t) => t.endToEndId).join(';'),
        e.counterparty,
        e.fee > 0n ? `${e.description} (bank fee ${formatAmount(e.fee)})` : e.description,
        formatAmount(running),
      ]);
    }
  }
  return csvText(BANK_CSV_COLUMNS, rows);
}
