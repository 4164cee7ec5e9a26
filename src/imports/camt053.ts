/**
 * camt.053 (ISO 20022 BankToCustomerStatement), versions 001.02 to 001.08, to bank statements.
 *
 * The XML is read by saxes: a strict, conformant XML parser (a file that is not well-formed XML is refused
 * with its line and column, never guessed at), streaming (each entry becomes a line when its element
 * closes, so a statement of 100,000 entries never sits in memory as a document tree), that hands over
 * every value as text (amounts go from text to bigint, no parser's number conversion in between), with
 * one small dependency, the parser exceljs itself reads XLSX with. Elements are matched by local name inside
 * the camt.053 namespace, so a prefixed document reads the same as one with a default namespace.
 *
 * Entries booked (Sts BOOK, as `<Sts>BOOK</Sts>` in 001.02 or `<Sts><Cd>BOOK</Cd></Sts>` from 001.08)
 * become lines; pending, future and informational entries are counted and skipped. Signs come from
 * CdtDbtInd on balances and entries alike (a reversal's CdtDbtInd is its own direction, per the standard).
 * A statement's booked entries must take its opening balance (OPBD, else PRCD) to its closing one (CLBD).
 */
import { SaxesParser, type SaxesTagNS } from 'saxes';
import type { Minor } from '../domain/money.ts';
import { isCurrencyCode, parseCurrencyAmount } from './currency.ts';
import { isCalendarDate } from './dates.ts';
import { normaliseText } from './identity.ts';
import { accepted, ImportRefusal, type ImportResult, quote, refused, utf8Text } from './refusal.ts';
import {
  type BankStatement,
  type DraftLine,
  finishStatement,
  NOT_PROVIDED,
  type StatementFormat,
  type TransactionDetails,
} from './statement.ts';

const NAMESPACE = /^urn:iso:std:iso:20022:tech:xsd:camt\.053\.001\.0([2-8])$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})/;

interface XmlNode {
  name: string;
  attributes: Map<string, string>;
  text: string;
  children: XmlNode[];
}

function child(node: XmlNode | undefined, ...path: string[]): XmlNode | undefined {
  let at = node;
  for (const name of path) at = at?.children.find((c) => c.name === name);
  return at;
}

function children(node: XmlNode | undefined, name: string): XmlNode[] {
  return node === undefined ? [] : node.children.filter((c) => c.name === name);
}

/** The trimmed text of an element, null when it is absent or empty. */
function textOf(node: XmlNode | undefined, ...path: string[]): string | null {
  const text = child(node, ...path)?.text.trim();
  return text === undefined || text === '' ? null : text;
}

/** Raised inside the parser's callbacks to stop it; caught by `parseCamt053`. */
class Stop extends Error {
  constructor(readonly refusal: ImportRefusal) {
    super(refusal.message);
  }
}

interface StatementState {
  number: number;
  id: string | null;
  account: string | null;
  currency: string | null;
  balances: XmlNode[];
  drafts: DraftLine[];
  pending: number;
  entries: number;
}

/**
 * Parses a camt.053 file into its statements (one per Stmt, in file order). `file` names the file in a
 * refusal. All or nothing: any refusal and no statement at all.
 */
export function parseCamt053(file: string, content: string | Uint8Array): ImportResult<BankStatement[]> {
  const decoded = utf8Text(file, content);
  if (!decoded.ok) return decoded;
  let text = decoded.value;
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);

  const fail = (where: string | null, rule: string): never => {
    throw new Stop(new ImportRefusal(file, where, rule));
  };

  const parser = new SaxesParser({ xmlns: true, position: true });
  const statements: BankStatement[] = [];
  let format: StatementFormat | null = null;
  /** Open elements: the local names, and the nodes being built inside a Stmt (null outside). */
  const names: string[] = [];
  const nodes: (XmlNode | null)[] = [];
  let statement: StatementState | null = null;
  let statementCount = 0;

  parser.on('xmldecl', (decl) => {
    if (decl.encoding !== undefined && decl.encoding.toLowerCase().replace('_', '-') !== 'utf-8') {
      fail(null, `declares the encoding ${quote(decl.encoding)}: camt.053 files are read as UTF-8`);
    }
  });
  parser.on('doctype', () => fail(null, 'has a DOCTYPE: a camt.053 file has none'));
  parser.on('opentag', (tag: SaxesTagNS) => {
    const depth = names.length;
    if (depth === 0) {
      const version = NAMESPACE.exec(tag.uri);
      if (tag.local !== 'Document' || version === null) {
        fail(
          null,
          `is not a camt.053.001.02 to .08 document (root ${quote(tag.local)} in namespace ${quote(tag.uri)})`,
        );
      }
      format = `camt.053.001.0${(version as RegExpExecArray)[1]}` as StatementFormat;
    } else if (depth === 1 && tag.local !== 'BkToCstmrStmt') {
      fail(null, `Document holds ${quote(tag.local)}, not BkToCstmrStmt`);
    } else if (depth === 2 && tag.local === 'Stmt') {
      statementCount += 1;
      statement = {
        number: statementCount,
        id: null,
        account: null,
        currency: null,
        balances: [],
        drafts: [],
        pending: 0,
        entries: 0,
      };
    }
    names.push(tag.local);
    if (statement !== null && depth >= 3) {
      const node: XmlNode = { name: tag.local, attributes: new Map(), text: '', children: [] };
      for (const attribute of Object.values(tag.attributes))
        node.attributes.set(attribute.local, attribute.value);
      nodes[nodes.length - 1]?.children.push(node);
      nodes.push(node);
    } else {
      nodes.push(null);
    }
  });
  const onText = (value: string) => {
    const node = nodes[nodes.length - 1];
    if (node) node.text += value;
  };
  parser.on('text', onText);
  parser.on('cdata', onText);
  parser.on('closetag', () => {
    const node = nodes.pop();
    names.pop();
    const depth = names.length;
    const current = statement as StatementState | null;
    if (current === null) return;
    if (depth === 3 && node) onStatementChild(current, node);
    else if (depth === 2) {
      const done = closeStatement(current);
      if (!done.ok) throw new Stop(done.refusal);
      statements.push(done.value);
      statement = null;
    }
  });

  const statementName = (s: StatementState) =>
    s.id === null ? `statement ${s.number}` : `statement ${s.number} (Id ${s.id})`;

  function onStatementChild(s: StatementState, node: XmlNode): void {
    switch (node.name) {
      case 'Id':
        s.id = node.text.trim() || null;
        return;
      case 'Acct': {
        s.account = textOf(node, 'Id', 'IBAN') ?? textOf(node, 'Id', 'Othr', 'Id');
        if (s.account === null) fail(statementName(s), 'Acct/Id has neither IBAN nor Othr/Id');
        const currency = textOf(node, 'Ccy');
        if (currency !== null) s.currency = checkCurrency(s, statementName(s), 'Acct/Ccy', currency);
        return;
      }
      case 'Bal':
        s.balances.push(node);
        return;
      case 'Ntry':
        s.entries += 1;
        onEntry(s, node);
        return;
      default:
        return;
    }
  }

  function checkCurrency(s: StatementState, where: string, field: string, currency: string | null): string {
    if (currency === null || !isCurrencyCode(currency)) {
      return fail(where, `${field} must be an ISO 4217 currency code (got ${quote(currency ?? '')})`);
    }
    if (s.currency !== null && s.currency !== currency) {
      return fail(where, `${field} ${currency} differs from the statement's currency ${s.currency}`);
    }
    return currency;
  }

  /** A signed amount from an element holding `Amt Ccy="..."` and `CdtDbtInd`. */
  function signedAmount(
    where: string,
    amountNode: XmlNode | undefined,
    indicator: string | null,
    field: string,
  ): { amount: Minor; currency: string } {
    const value = amountNode?.text.trim() ?? '';
    if (amountNode === undefined || value === '') return fail(where, `${field} is required`);
    const currency = amountNode.attributes.get('Ccy') ?? '';
    if (!isCurrencyCode(currency)) {
      return fail(where, `${field}/@Ccy must be an ISO 4217 currency code (got ${quote(currency)})`);
    }
    let magnitude: Minor;
    try {
      magnitude = parseCurrencyAmount(value, currency, { field, allowNegative: false });
    } catch (err) {
      return fail(where, (err as Error).message);
    }
    if (indicator === 'CRDT') return { amount: magnitude, currency };
    if (indicator === 'DBIT') return { amount: -magnitude, currency };
    return fail(where, `CdtDbtInd must be CRDT or DBIT (got ${quote(indicator ?? '')})`);
  }

  function dateOf(where: string, node: XmlNode | undefined, field: string, required: boolean): string | null {
    const value = textOf(node, 'Dt') ?? textOf(node, 'DtTm');
    if (value === null) return required ? fail(where, `${field}/Dt is required`) : null;
    const match = DATE.exec(value);
    if (match === null || !isCalendarDate(match[0])) {
      return fail(where, `${field} must be a date YYYY-MM-DD (got ${quote(value)})`);
    }
    return match[0];
  }

  function onEntry(s: StatementState, entry: XmlNode): void {
    const reference = textOf(entry, 'AcctSvcrRef');
    const where = `${statementName(s)}, entry ${s.entries}${reference === null ? '' : ` (AcctSvcrRef ${reference})`}`;
    const statusNode = child(entry, 'Sts');
    const status =
      statusNode === undefined
        ? null
        : statusNode.children.length === 0
          ? statusNode.text.trim()
          : textOf(statusNode, 'Cd');
    if (status === 'PDNG' || status === 'FUTR' || status === 'INFO') {
      s.pending += 1;
      return;
    }
    if (status !== 'BOOK') {
      fail(where, `Sts must be BOOK, PDNG, FUTR or INFO (got ${quote(status ?? '')})`);
    }
    const indicator = textOf(entry, 'CdtDbtInd');
    const { amount, currency } = signedAmount(where, child(entry, 'Amt'), indicator, 'Amt');
    s.currency = checkCurrency(s, where, 'Amt/@Ccy', currency);
    const reversalText = textOf(entry, 'RvslInd');
    if (reversalText !== null && !['true', 'false', '1', '0'].includes(reversalText)) {
      fail(where, `RvslInd must be true or false (got ${quote(reversalText)})`);
    }
    const transactions: TransactionDetails[] = [];
    for (const details of children(entry, 'NtryDtls')) {
      for (const tx of children(details, 'TxDtls')) {
        transactions.push(onTransaction(`${where}, TxDtls ${transactions.length + 1}`, tx, indicator));
      }
    }
    const references: string[] = [];
    for (const r of [
      textOf(entry, 'NtryRef'),
      reference,
      ...transactions.flatMap((t) => Object.values(t.references)),
    ]) {
      if (r !== null && !references.includes(r)) references.push(r);
    }
    const distinct = (values: (string | null)[]) => [...new Set(values.filter((v) => v !== null))];
    const endToEndIds = distinct(transactions.map((t) => t.endToEndId));
    const counterparties = distinct(transactions.map((t) => t.counterparty));
    const descriptions = distinct(transactions.map((t) => t.description));
    const entryInfo = textOf(entry, 'AddtlNtryInf');
    s.drafts.push({
      position: s.entries,
      reference,
      bookingDate: dateOf(where, child(entry, 'BookgDt'), 'BookgDt', true) as string,
      valueDate: dateOf(where, child(entry, 'ValDt'), 'ValDt', false),
      amount,
      currency,
      reversal: reversalText === 'true' || reversalText === '1',
      endToEndIds,
      references,
      counterparty: counterparties.length === 0 ? null : counterparties.join('; '),
      description:
        descriptions.length > 0
          ? descriptions.join('; ')
          : entryInfo === null
            ? null
            : normaliseText(entryInfo),
      transactions,
    });
  }

  function onTransaction(where: string, tx: XmlNode, entryIndicator: string | null): TransactionDetails {
    const references: Record<string, string> = {};
    for (const ref of child(tx, 'Refs')?.children ?? []) {
      const value = ref.text.trim();
      if (ref.children.length === 0 && value !== '' && value !== NOT_PROVIDED) references[ref.name] = value;
    }
    const amountNode =
      child(tx, 'Amt') ?? child(tx, 'AmtDtls', 'TxAmt', 'Amt') ?? child(tx, 'AmtDtls', 'InstdAmt', 'Amt');
    const indicator = textOf(tx, 'CdtDbtInd') ?? entryIndicator;
    const signed = amountNode === undefined ? null : signedAmount(where, amountNode, indicator, 'Amt');
    // The other party: the debtor of a credit, the creditor of a debit; a name as 001.02 (Dbtr/Nm) or
    // from 001.08 (Dbtr/Pty/Nm) gives it, the ultimate party when the direct one has none.
    const parties = child(tx, 'RltdPties');
    const side = indicator === 'DBIT' ? ['Cdtr', 'UltmtCdtr'] : ['Dbtr', 'UltmtDbtr'];
    let counterparty: string | null = null;
    for (const role of side) {
      counterparty ??= textOf(parties, role, 'Nm') ?? textOf(parties, role, 'Pty', 'Nm');
    }
    const lines = children(child(tx, 'RmtInf'), 'Ustrd')
      .map((u) => u.text.trim())
      .filter((u) => u !== '');
    const additional = textOf(tx, 'AddtlTxInf');
    const description = lines.length > 0 ? lines.join(' ') : additional;
    return {
      amount: signed?.amount ?? null,
      currency: signed?.currency ?? null,
      endToEndId: references.EndToEndId ?? null,
      references,
      counterparty: counterparty === null ? null : normaliseText(counterparty),
      description: description === null ? null : normaliseText(description),
    };
  }

  function balanceOf(s: StatementState, codes: readonly string[]): { amount: Minor; date: string } | null {
    for (const code of codes) {
      const found = s.balances.filter(
        (b) => (textOf(b, 'Tp', 'CdOrPrtry', 'Cd') ?? textOf(b, 'Tp', 'CdOrPrtry', 'Prtry')) === code,
      );
      if (found.length > 1) fail(statementName(s), `has ${found.length} ${code} balances: one is allowed`);
      const balance = found[0];
      if (balance === undefined) continue;
      const where = `${statementName(s)}, ${code} balance`;
      const { amount, currency } = signedAmount(
        where,
        child(balance, 'Amt'),
        textOf(balance, 'CdtDbtInd'),
        'Amt',
      );
      s.currency = checkCurrency(s, where, 'Amt/@Ccy', currency);
      const date = dateOf(where, child(balance, 'Dt'), 'Dt', true) as string;
      return { amount, date };
    }
    return null;
  }

  function closeStatement(s: StatementState): ImportResult<BankStatement> {
    const where = statementName(s);
    if (s.account === null) return refused(file, where, 'has no Acct');
    const opening = balanceOf(s, ['OPBD', 'PRCD']);
    if (opening === null) return refused(file, where, 'has no opening balance (OPBD or PRCD)');
    const closing = balanceOf(s, ['CLBD']);
    if (closing === null) return refused(file, where, 'has no closing balance (CLBD)');
    return finishStatement(
      file,
      `${where}, account ${s.account}`,
      {
        format: format as StatementFormat,
        statementId: s.id,
        account: s.account,
        currency: s.currency as string,
        opening: opening.amount,
        closing: closing.amount,
        closingDate: closing.date,
        pending: s.pending,
      },
      s.drafts,
      (line) => `entry ${line.position}${line.reference === null ? '' : ` (AcctSvcrRef ${line.reference})`}`,
    );
  }

  try {
    parser.write(text).close();
  } catch (err) {
    if (err instanceof Stop) return { ok: false, refusal: err.refusal };
    return refused(file, null, `does not parse as XML: ${(err as Error).message}`);
  }
  if (statements.length === 0) return refused(file, null, 'holds no statement (Stmt)');
  return accepted(statements);
}
