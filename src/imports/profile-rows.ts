/**
 * The rows of a CSV or XLSX table read through a mapping profile: bank statement lines, provider
 * transactions, provider settlements. Every cell a profile names is checked (dates, amounts in the
 * currency's digits, signs, ids); one bad row refuses the whole file, naming the row, the column and the
 * rule.
 */
import { formatAmount, type Minor } from '../domain/money.ts';
import { isCurrencyCode, parseCurrencyAmount } from './currency.ts';
import { isCalendarDate } from './dates.ts';
import { contentHash, normaliseText, referenceIdentity } from './identity.ts';
import type {
  BankProfile,
  Profile,
  SettlementsProfile,
  TransactionsProfile,
  TransactionType,
} from './profile.ts';
import { TRANSACTION_TYPES } from './profile.ts';
import { accepted, ImportRefusal, type ImportResult, quote } from './refusal.ts';
import { type BankStatement, type DraftLine, finishStatement, NOT_PROVIDED } from './statement.ts';
import type { Cell, Table, TableRow } from './table.ts';

export interface ProviderTransaction {
  identity: string;
  contentHash: string;
  /** The row's number in the file (header = row 1). */
  row: number;
  transactionId: string;
  type: TransactionType;
  status: string;
  externalId: string | null;
  invoiceId: string | null;
  currency: string;
  /** Signed from the merchant balance's side: deposit +, cashout, refund, fee and settlement -. */
  gross: Minor;
  /** The fee taken from the balance (>= 0). */
  fee: Minor;
  net: Minor;
  createdAt: string;
  updatedAt: string | null;
  settlementId: string | null;
}

export interface ProviderSettlement {
  identity: string;
  contentHash: string;
  row: number;
  settlementId: string;
  account: string | null;
  periodStart: string | null;
  periodEnd: string | null;
  /** The swept balance's currency and amount. */
  currency: string;
  gross: Minor;
  /** The settlement fee (>= 0), in the settlement currency. */
  fees: Minor;
  settlementCurrency: string;
  /** Decimal text, exact as the report wrote it (up to 10 decimals). */
  rate: string;
  /** In the settlement currency: round(gross x rate) - fees. */
  net: Minor;
  valueDate: string;
  bankReference: string | null;
  /**
   * The provider's balance at the cut-off before the payout, in `currency` (`balanceAtCutoff`, else
   * `balanceAfter` plus the gross); null when the row gives none.
   */
  balanceAtCutoff: Minor | null;
}

/** Raised while reading a row; caught at the top of each reader. */
class Stop extends Error {
  constructor(readonly refusal: ImportRefusal) {
    super(refusal.message);
  }
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;
const RATE = /^\d+(?:\.\d{1,10})?$/;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Reads the fields a profile names from the rows of one table. */
class RowReader {
  private readonly index = new Map<string, number>();
  private readonly numberPattern: RegExp;
  private readonly datePattern: RegExp;
  private readonly dateOrder: ('YYYY' | 'MM' | 'DD')[];
  row: TableRow = { number: 0, cells: [] };

  constructor(
    readonly file: string,
    readonly profile: Profile,
    table: Table,
  ) {
    const columns = Object.entries(profile.columns as Record<string, string | undefined>);
    if (profile.sign.convention === 'direction') columns.push(['direction', profile.sign.column]);
    const mayLack = new Set(profile.optionalColumns ?? []);
    for (const [field, name] of columns) {
      if (name === undefined) continue;
      const at = table.header.indexOf(name);
      // A column the profile lets a file lack reads as if the profile named none.
      if (at < 0 && mayLack.has(field)) continue;
      if (at < 0) this.fail('header', `has no column ${quote(name)} (the profile's ${field})`);
      if (table.header.indexOf(name, at + 1) >= 0) this.fail('header', `has the column ${quote(name)} twice`);
      this.index.set(field, at);
    }
    const { decimal, thousands } = profile.number;
    const d = escapeRegExp(decimal);
    const grouped = thousands === '' ? '\\d+' : `(?:\\d{1,3}(?:${escapeRegExp(thousands)}\\d{3})+|\\d+)`;
    this.numberPattern = new RegExp(`^([+-]?)(${grouped})(?:${d}(\\d+))?$`);
    const order: ('YYYY' | 'MM' | 'DD')[] = [];
    const pattern = profile.dateFormat.split(/(YYYY|MM|DD)/).map((part) => {
      if (part === 'YYYY' || part === 'MM' || part === 'DD') {
        order.push(part);
        return part === 'YYYY' ? '(\\d{4})' : '(\\d{2})';
      }
      return escapeRegExp(part);
    });
    this.datePattern = new RegExp(`^${pattern.join('')}$`);
    this.dateOrder = order;
  }

  fail(where: string, rule: string): never {
    throw new Stop(new ImportRefusal(this.file, where, rule));
  }

  private columnName(field: string): string {
    if (field === 'direction' && this.profile.sign.convention === 'direction')
      return this.profile.sign.column;
    return (this.profile.columns as Record<string, string>)[field] ?? field;
  }

  private failCell(field: string, rule: string): never {
    return this.fail(`row ${this.row.number}`, `${quote(this.columnName(field))} ${rule}`);
  }

  private cell(field: string): Cell | null {
    const at = this.index.get(field);
    if (at === undefined) return null;
    const value = this.row.cells[at] ?? '';
    return typeof value === 'string' && value.trim() === '' ? null : value;
  }

  /** Trimmed text, or null when the column is absent or the cell empty. */
  text(field: string): string | null {
    const value = this.cell(field);
    if (value === null) return null;
    if (value instanceof Date) return this.failCell(field, 'holds a date, not text');
    return value.trim();
  }

  required(field: string): string {
    return this.text(field) ?? this.failCell(field, 'is empty');
  }

  currency(field: string): string {
    const value = this.required(field);
    if (!isCurrencyCode(value))
      this.failCell(field, `must be an ISO 4217 currency code (got ${quote(value)})`);
    return value;
  }

  /** An amount in the profile's number format; `signed` amounts follow the profile's sign convention. */
  amount(field: string, currency: string, kind: 'signed' | 'unsigned' | 'balance'): Minor {
    const raw = this.required(field);
    const match = this.numberPattern.exec(raw);
    if (match === null) {
      this.failCell(field, `must be a number written as ${this.numberExample()} (got ${quote(raw)})`);
    }
    const [, sign = '', integer = '', fraction] = match as RegExpExecArray;
    const plain = `${sign}${integer.split(this.profile.number.thousands || '\u0000').join('')}${
      fraction === undefined ? '' : `.${fraction}`
    }`;
    const byDirection = kind === 'signed' && this.profile.sign.convention === 'direction';
    let value: Minor;
    try {
      value = parseCurrencyAmount(plain, currency, {
        field: this.columnName(field),
        allowNegative: kind === 'balance' || (kind === 'signed' && !byDirection),
      });
    } catch (err) {
      return this.fail(`row ${this.row.number}`, (err as Error).message);
    }
    if (byDirection && this.profile.sign.convention === 'direction') {
      const direction = this.required('direction');
      if (this.profile.sign.credit.includes(direction)) return value;
      if (this.profile.sign.debit.includes(direction)) return -value;
      this.failCell(
        'direction',
        `must be one of ${[...this.profile.sign.credit, ...this.profile.sign.debit].join(', ')} (got ${quote(direction)})`,
      );
    }
    return value;
  }

  private numberExample(): string {
    const { decimal, thousands } = this.profile.number;
    return thousands === '' ? `1234${decimal}56` : `1${thousands}234${decimal}56`;
  }

  /** A date in the profile's date format, as `YYYY-MM-DD`; a spreadsheet date cell gives its UTC day. */
  date(field: string): string;
  date(field: string, optional: true): string | null;
  date(field: string, optional = false): string | null {
    const value = this.cell(field);
    if (value === null) return optional ? null : this.failCell(field, 'is empty');
    if (value instanceof Date) return value.toISOString().slice(0, 10);
    const match = this.datePattern.exec(value.trim());
    if (match !== null) {
      const parts: Record<string, string> = {};
      this.dateOrder.forEach((token, i) => {
        parts[token] = match[i + 1] as string;
      });
      const iso = `${parts.YYYY}-${parts.MM}-${parts.DD}`;
      if (isCalendarDate(iso)) return iso;
    }
    return this.failCell(
      field,
      `must be a date written as ${this.profile.dateFormat} (got ${quote(value.trim())})`,
    );
  }

  /** An ISO 8601 instant with its offset, as UTC (`2026-11-28T10:00:00.000Z`). */
  instant(field: string): string;
  instant(field: string, optional: true): string | null;
  instant(field: string, optional = false): string | null {
    const value = this.cell(field);
    if (value === null) return optional ? null : this.failCell(field, 'is empty');
    if (value instanceof Date) return value.toISOString();
    const text = value.trim();
    const time = ISO_INSTANT.test(text) && isCalendarDate(text.slice(0, 10)) ? Date.parse(text) : Number.NaN;
    if (Number.isNaN(time)) {
      return this.failCell(field, `must be an ISO 8601 instant with an offset (got ${quote(text)})`);
    }
    return new Date(time).toISOString();
  }

  rate(field: string): string {
    const raw = this.required(field);
    const plain = this.profile.number.decimal === '.' ? raw : raw.replace(this.profile.number.decimal, '.');
    if (!RATE.test(plain) || /^0+(?:\.0+)?$/.test(plain)) {
      this.failCell(field, `must be a positive decimal with at most 10 decimals (got ${quote(raw)})`);
    }
    return plain;
  }
}

function run<T>(read: () => T): ImportResult<T> {
  try {
    return accepted(read());
  } catch (err) {
    if (err instanceof Stop) return { ok: false, refusal: err.refusal };
    throw err;
  }
}

/** Refuses a second row with an identity already seen in the file. */
function uniqueIdentities(reader: RowReader, rows: readonly { identity: string; row: number }[]): void {
  const seen = new Map<string, number>();
  for (const { identity, row } of rows) {
    const earlier = seen.get(identity);
    if (earlier !== undefined) {
      reader.fail(
        `row ${row}`,
        `its identity (${reader.profile.identity.join(', ')}) repeats row ${earlier}`,
      );
    }
    seen.set(identity, row);
  }
}

/**
 * The lines of a bank's CSV or XLSX statement, one statement per account and currency in the file. The
 * account comes from the profile's account column, else from `account`. With a balance column every row's
 * balance must be the previous one plus the row's amount; the first row's gives the opening balance.
 */
export function readBankRows(
  file: string,
  table: Table,
  profile: BankProfile,
  account: string | null,
): ImportResult<BankStatement[]> {
  const result = run(() => {
    const reader = new RowReader(file, profile, table);
    if (profile.columns.account === undefined && account === null) {
      reader.fail('profile', 'names no account column: the bank account must be given');
    }
    const groups = new Map<
      string,
      {
        account: string;
        currency: string;
        drafts: DraftLine[];
        keys: Map<DraftLine, string[] | null>;
        opening: Minor | null;
        balance: Minor | null;
      }
    >();
    for (const row of table.rows) {
      reader.row = row;
      const rowAccount =
        profile.columns.account === undefined ? (account as string) : reader.required('account');
      const currency =
        profile.columns.currency === undefined ? (profile.currency as string) : reader.currency('currency');
      const amount = reader.amount('amount', currency, 'signed');
      const key = `${rowAccount}\u0000${currency}`;
      let group = groups.get(key);
      if (group === undefined) {
        group = { account: rowAccount, currency, drafts: [], keys: new Map(), opening: null, balance: null };
        groups.set(key, group);
      }
      if (profile.columns.balanceAfter !== undefined) {
        const after = reader.amount('balanceAfter', currency, 'balance');
        if (group.balance === null) group.opening = after - amount;
        else if (group.balance + amount !== after) {
          reader.fail(
            `row ${row.number}`,
            `the balance ${formatAmount(after)} is not the previous balance ${formatAmount(group.balance)} ` +
              `plus the amount ${formatAmount(amount)}`,
          );
        }
        group.balance = after;
      }
      const reference = reader.text('reference');
      const endToEndCell = reader.text('endToEndId');
      const endToEndIds = [
        ...new Set(
          (endToEndCell === null
            ? []
            : profile.endToEndIdSeparator === undefined
              ? [endToEndCell]
              : endToEndCell.split(profile.endToEndIdSeparator)
          )
            .map((id) => id.trim())
            .filter((id) => id !== '' && id !== NOT_PROVIDED),
        ),
      ];
      const counterparty = reader.text('counterparty');
      const description = reader.text('description');
      const identityValues = profile.identity.map((field) => reader.text(field));
      const line: DraftLine = {
        position: row.number,
        reference,
        bookingDate: reader.date('bookingDate'),
        valueDate: reader.date('valueDate', true),
        amount,
        currency,
        reversal: false,
        endToEndIds,
        references: [...(reference === null ? [] : [reference]), ...endToEndIds],
        counterparty: counterparty === null ? null : normaliseText(counterparty),
        description: description === null ? null : normaliseText(description),
        transactions: [],
      };
      group.drafts.push(line);
      group.keys.set(line, identityValues.some((v) => v === null) ? null : (identityValues as string[]));
    }
    const statements: BankStatement[] = [];
    for (const group of groups.values()) {
      const done = finishStatement(
        file,
        `account ${group.account} ${group.currency}`,
        {
          format: table.format,
          statementId: null,
          account: group.account,
          currency: group.currency,
          opening: group.opening,
          closing: group.balance,
          pending: 0,
        },
        group.drafts,
        (line) => `row ${line.position}`,
        (line) => group.keys.get(line) ?? null,
      );
      if (!done.ok) throw new Stop(done.refusal);
      statements.push(done.value);
    }
    return statements;
  });
  return result;
}

/** The rows of a provider's transactions report. */
export function readTransactionRows(
  file: string,
  table: Table,
  profile: TransactionsProfile,
): ImportResult<ProviderTransaction[]> {
  return run(() => {
    const reader = new RowReader(file, profile, table);
    const out: ProviderTransaction[] = table.rows.map((row) => {
      reader.row = row;
      const rawType = reader.required('type');
      const type = profile.types
        ? profile.types[rawType]
        : (TRANSACTION_TYPES as readonly string[]).includes(rawType)
          ? (rawType as TransactionType)
          : undefined;
      if (type === undefined) {
        reader.fail(
          `row ${row.number}`,
          `${quote(profile.columns.type)} must be one of ${Object.keys(profile.types ?? {}).join(', ') || TRANSACTION_TYPES.join(', ')} (got ${quote(rawType)})`,
        );
      }
      const currency = reader.currency('currency');
      const gross = reader.amount('gross', currency, 'signed');
      const fee = reader.amount('fee', currency, 'unsigned');
      const net = reader.amount('net', currency, 'signed');
      if (profile.checkNet && net !== gross - fee) {
        reader.fail(
          `row ${row.number}`,
          `net ${formatAmount(net)} is not gross ${formatAmount(gross)} minus fee ${formatAmount(fee)}`,
        );
      }
      const record = {
        row: row.number,
        transactionId: reader.required('transactionId'),
        type: type as TransactionType,
        status: reader.required('status'),
        externalId: reader.text('externalId'),
        invoiceId: reader.text('invoiceId'),
        currency,
        gross,
        fee,
        net,
        createdAt: reader.instant('createdAt'),
        updatedAt: reader.instant('updatedAt', true),
        settlementId: reader.text('settlementId'),
      };
      return withIdentity(reader, record, [
        record.transactionId,
        record.type,
        record.status,
        record.externalId ?? '',
        record.invoiceId ?? '',
        currency,
        formatAmount(gross),
        formatAmount(fee),
        formatAmount(net),
        record.createdAt,
        record.updatedAt ?? '',
        record.settlementId ?? '',
      ]);
    });
    uniqueIdentities(reader, out);
    return out;
  });
}

/** The rows of a provider's settlement report. */
export function readSettlementRows(
  file: string,
  table: Table,
  profile: SettlementsProfile,
): ImportResult<ProviderSettlement[]> {
  return run(() => {
    const reader = new RowReader(file, profile, table);
    const out: ProviderSettlement[] = table.rows.map((row) => {
      reader.row = row;
      const currency = reader.currency('currency');
      const settlementCurrency = reader.currency('settlementCurrency');
      const gross = reader.amount('gross', currency, 'signed');
      const fees = reader.amount('fees', settlementCurrency, 'unsigned');
      const net = reader.amount('net', settlementCurrency, 'signed');
      const rate = reader.rate('rate');
      if (profile.checkNet && !netMatchesRate(gross, rate, fees, net)) {
        reader.fail(
          `row ${row.number}`,
          `net ${formatAmount(net)} is not gross ${formatAmount(gross)} x rate ${rate} ` +
            `minus fees ${formatAmount(fees)} (to half a minor unit)`,
        );
      }
      const balanceAtCutoff = settlementBalance(reader, row.number, currency, gross);
      const record = {
        row: row.number,
        settlementId: reader.required('settlementId'),
        account: reader.text('account'),
        periodStart: reader.instant('periodStart', true),
        periodEnd: reader.instant('periodEnd', true),
        currency,
        gross,
        fees,
        settlementCurrency,
        rate,
        net,
        valueDate: reader.date('valueDate'),
        bankReference: reader.text('bankReference'),
        balanceAtCutoff,
      };
      return withIdentity(reader, record, [
        record.settlementId,
        record.account ?? '',
        record.periodStart ?? '',
        record.periodEnd ?? '',
        currency,
        formatAmount(gross),
        formatAmount(fees),
        settlementCurrency,
        rate,
        formatAmount(net),
        record.valueDate,
        record.bankReference ?? '',
        // Only a row that gives a balance hashes it: a row without one keeps the hash it always had.
        ...(balanceAtCutoff === null ? [] : [`balance ${formatAmount(balanceAtCutoff)}`]),
      ]);
    });
    uniqueIdentities(reader, out);
    return out;
  });
}

/**
 * A settlement row's balance at the cut-off: its `balanceAtCutoff` cell, else its `balanceAfter` cell plus
 * the gross (what the payout left plus what it took); null when it gives neither. With both, the balance
 * after must be the balance at the cut-off less the gross.
 */
function settlementBalance(reader: RowReader, row: number, currency: string, gross: Minor): Minor | null {
  const at =
    reader.text('balanceAtCutoff') === null ? null : reader.amount('balanceAtCutoff', currency, 'balance');
  const after =
    reader.text('balanceAfter') === null ? null : reader.amount('balanceAfter', currency, 'balance');
  if (at !== null && after !== null && at - gross !== after) {
    reader.fail(
      `row ${row}`,
      `the balance after ${formatAmount(after)} is not the balance at the cut-off ${formatAmount(at)} ` +
        `less the gross ${formatAmount(gross)}`,
    );
  }
  return at ?? (after === null ? null : after + gross);
}

/**
 * True when net + fees is gross x rate rounded to a minor unit (either way at exactly a half): the check
 * is on integers, |(net + fees) x 10^k - gross x rate x 10^k| <= 10^k / 2 for a rate of k decimals.
 */
export function netMatchesRate(gross: Minor, rate: string, fees: Minor, net: Minor): boolean {
  const [whole = '0', decimals = ''] = rate.split('.');
  const scale = 10n ** BigInt(decimals.length);
  const product = gross * BigInt(whole + decimals);
  const difference = (net + fees) * scale - product;
  return 2n * (difference < 0n ? -difference : difference) <= scale;
}

function withIdentity<T extends { row: number }>(
  reader: RowReader,
  record: T,
  content: string[],
): T & { identity: string; contentHash: string } {
  const values = reader.profile.identity.map((field) => {
    const value = (record as Record<string, unknown>)[field];
    if (value === null || value === undefined || value === '') {
      return reader.fail(`row ${record.row}`, `the identity field ${field} is empty`);
    }
    return typeof value === 'bigint' ? formatAmount(value) : String(value);
  });
  return {
    ...record,
    identity: referenceIdentity(reader.profile.kind, values),
    contentHash: contentHash([reader.profile.kind, ...content]),
  };
}
