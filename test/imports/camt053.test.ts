/** camt.053 statements written by hand from the standard (001.02 and 001.08) read into bank statements. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseCamt053 } from '../../src/imports/camt053.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import type { BankStatement } from '../../src/imports/statement.ts';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const V02 = fixture('camt053-001-02.xml');
const V08 = fixture('camt053-001-08.xml');

function statements(result: ImportResult<BankStatement[]>): BankStatement[] {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

function refusal(result: ImportResult<unknown>): string {
  if (result.ok) throw new Error('accepted, expected a refusal');
  expect(result.refusal.message).not.toMatch(/\n/);
  expect(result.refusal.code).toBe('VALIDATION_FAILED');
  return result.refusal.message;
}

describe('camt.053.001.02', () => {
  const [statement] = statements(parseCamt053('camt053-001-02.xml', V02));

  it('reads the account, the PRCD opening and the CLBD closing beyond a double, exactly', () => {
    expect(statement).toMatchObject({
      format: 'camt.053.001.02',
      statementId: 'STMT-20261127-1',
      account: 'DE89370400440532013000',
      currency: 'EUR',
      opening: 1234567890123456789n,
      closing: 1234567890123581787n,
      closingDate: '2026-11-27',
    });
    // A double cannot hold the opening balance: the parse went through text alone.
    expect(BigInt(Math.round(Number('12345678901234567.89') * 100))).not.toBe(statement?.opening);
  });

  it('counts booked and pending entries, skips the pending one, and sums credits and debits', () => {
    expect(statement?.booked).toBe(4);
    expect(statement?.pending).toBe(1);
    expect(statement?.lines.map((l) => l.reference)).toEqual([
      'BNK-20261127-0001',
      'BNK-20261127-0002',
      null,
      null,
    ]);
    expect(statement?.credits).toBe(150000n);
    expect(statement?.debits).toBe(-25002n);
  });

  it('keeps each transaction of a batch entry with its amount and references', () => {
    const batch = statement?.lines[0];
    expect(batch).toMatchObject({
      position: 1,
      bookingDate: '2026-11-27',
      valueDate: '2026-11-27',
      amount: 150000n,
      reversal: false,
      endToEndIds: ['STL-S1', 'STL-S2'],
      counterparty: 'Payment Provider Ltd',
      description: 'Settlement S1; Settlement S2',
    });
    expect(batch?.transactions).toEqual([
      {
        amount: 100000n,
        currency: 'EUR',
        endToEndId: 'STL-S1',
        references: { MsgId: 'PAYOUT-20261127', EndToEndId: 'STL-S1', TxId: 'TX-0001' },
        counterparty: 'Payment Provider Ltd',
        description: 'Settlement S1',
      },
      {
        amount: 50000n,
        currency: 'EUR',
        endToEndId: 'STL-S2',
        references: { MsgId: 'PAYOUT-20261127', EndToEndId: 'STL-S2', TxId: 'TX-0002' },
        counterparty: 'Payment Provider Ltd',
        description: 'Settlement S2',
      },
    ]);
    expect(batch?.references).toEqual([
      '1',
      'BNK-20261127-0001',
      'PAYOUT-20261127',
      'STL-S1',
      'TX-0001',
      'STL-S2',
      'TX-0002',
    ]);
  });

  it('reads a reversal with the sign of its own CdtDbtInd', () => {
    expect(statement?.lines[1]).toMatchObject({
      amount: -25000n,
      reversal: true,
      valueDate: '2026-11-26',
      endToEndIds: ['STL-S0'],
      counterparty: 'Payment Provider Ltd',
      description: 'Return of settlement S0',
    });
    // 001.02 gives this transaction no amount of its own.
    expect(statement?.lines[1]?.transactions[0]?.amount).toBeNull();
  });

  it('identifies lines by account and AcctSvcrRef, else by content and occurrence', () => {
    const [batch, reversal, fee1, fee2] = statement?.lines ?? [];
    const identities = [batch, reversal, fee1, fee2].map((l) => l?.identity);
    expect(new Set(identities).size).toBe(4);
    for (const identity of identities) expect(identity).toMatch(/^[0-9a-f]{64}$/);
    // The two equal fees (white space aside) differ in occurrence only: same content, two lines.
    expect(fee1?.description).toBe('Account fee');
    expect(fee1?.contentHash).toBe(fee2?.contentHash);
    expect(fee1?.identity).not.toBe(fee2?.identity);
  });
});

describe('camt.053.001.08', () => {
  const [first, second] = statements(parseCamt053('camt053-001-08.xml', V08));

  it('reads both statements; an account by Othr/Id and a debit closing balance', () => {
    expect(first).toMatchObject({ format: 'camt.053.001.08', opening: 1234567890123456789n });
    expect(second).toMatchObject({
      statementId: 'STMT-20261127-2',
      account: '0532013001',
      currency: 'USD',
      opening: 10000n,
      closing: -14000n,
      booked: 3,
      pending: 1,
      credits: 6000n,
      debits: -30000n,
    });
  });

  it('takes the creditor of a debit as counterparty, joins the Ustrd lines and drops NOTPROVIDED', () => {
    expect(second?.lines[0]).toMatchObject({
      amount: -30000n,
      reference: 'USD-0001',
      counterparty: 'Office Landlord Inc',
      description: 'Rent November',
      endToEndIds: [],
      references: ['USD-0001', 'RENT-NOV'],
    });
  });

  it('keeps the amounts of a batch entry, signed by the TxDtls CdtDbtInd', () => {
    expect(second?.lines[1]?.transactions.map((t) => [t.endToEndId, t.amount])).toEqual([
      ['STL-S7', 3000n],
      ['STL-S8', 2000n],
    ]);
    expect(first?.lines[1]?.transactions[0]?.amount).toBe(-25000n);
  });

  it('reads a reversal credit and its AddtlNtryInf', () => {
    expect(second?.lines[2]).toMatchObject({
      amount: 1000n,
      reversal: true,
      valueDate: null,
      description: 'Reversal of card fee',
    });
  });

  it('gives the same statement the same identities in 001.02 and 001.08 (and across runs)', () => {
    const [v02] = statements(parseCamt053('camt053-001-02.xml', V02));
    expect(first?.lines.map((l) => l.identity)).toEqual(v02?.lines.map((l) => l.identity));
    expect(first?.lines.map((l) => l.contentHash)).toEqual(v02?.lines.map((l) => l.contentHash));
    const [again] = statements(parseCamt053('other-name.xml', Buffer.from(V08)));
    expect(again?.lines.map((l) => l.identity)).toEqual(first?.lines.map((l) => l.identity));
  });
});

describe('camt.053 forms', () => {
  it('reads <Sts><Cd>BOOK</Cd></Sts> in 001.02 and <Sts>BOOK</Sts> in 001.08 alike', () => {
    const plain = statements(parseCamt053('a.xml', V02));
    const coded = statements(
      parseCamt053('b.xml', V02.replace(/<Sts>(BOOK|PDNG)<\/Sts>/g, '<Sts><Cd>$1</Cd></Sts>')),
    );
    expect(coded).toEqual(plain);
    const v08 = statements(parseCamt053('c.xml', V08));
    const uncoded = statements(
      parseCamt053('d.xml', V08.replace(/<Sts>\s*<Cd>(\w+)<\/Cd>\s*<\/Sts>/g, '<Sts>$1</Sts>')),
    );
    expect(uncoded).toEqual(v08);
  });

  it('reads a document whose elements carry a namespace prefix', () => {
    const prefixed = V02.replace(/<(\/?)([A-Za-z])/g, '<$1c:$2')
      .replace('xmlns="urn:', 'xmlns:c="urn:')
      .replace('<c:?xml', '<?xml');
    expect(statements(parseCamt053('p.xml', prefixed))).toEqual(statements(parseCamt053('p.xml', V02)));
  });

  it('reads every version from 001.02 to 001.08 and no other', () => {
    for (const v of ['03', '04', '05', '06', '07']) {
      const [s] = statements(parseCamt053('v.xml', V08.replace('camt.053.001.08', `camt.053.001.${v}`)));
      expect(s?.format).toBe(`camt.053.001.${v}`);
    }
    expect(refusal(parseCamt053('v09.xml', V08.replace('camt.053.001.08', 'camt.053.001.09')))).toBe(
      'v09.xml: is not a camt.053.001.02 to .08 document (root "Document" in namespace ' +
        '"urn:iso:std:iso:20022:tech:xsd:camt.053.001.09")',
    );
  });
});

describe('camt.053 refusals', () => {
  it('refuses a statement whose booked entries do not reach its closing balance', () => {
    const unbalanced = V02.replace(
      '<Amt Ccy="EUR">12345678901235817.87</Amt>',
      '<Amt Ccy="EUR">12345678901235817.86</Amt>',
    );
    expect(refusal(parseCamt053('unbalanced.xml', unbalanced))).toBe(
      'unbalanced.xml: statement 1 (Id STMT-20261127-1), account DE89370400440532013000: the booked ' +
        'entries take the opening balance 12345678901234567.89 to 12345678901235817.87, not to the ' +
        'closing balance 12345678901235817.86',
    );
  });

  it('refuses a debit closing balance read as a credit (the sign comes from CdtDbtInd)', () => {
    const flipped = V08.replace(
      '<Amt Ccy="USD">140.00</Amt>\n        <CdtDbtInd>DBIT</CdtDbtInd>',
      '<Amt Ccy="USD">140.00</Amt>\n        <CdtDbtInd>CRDT</CdtDbtInd>',
    );
    expect(refusal(parseCamt053('flipped.xml', flipped))).toMatch(
      /^flipped\.xml: statement 2 \(Id STMT-20261127-2\), account 0532013001: .* to -140\.00, not to the closing balance 140\.00$/,
    );
  });

  it('refuses malformed XML with its line and column, and nothing is returned', () => {
    const cut = V02.slice(0, V02.indexOf('</Stmt>'));
    expect(refusal(parseCamt053('cut.xml', cut))).toMatch(/^cut\.xml: does not parse as XML: .*\d+:\d+: /);
    const crossed = V02.replace('<Sts>BOOK</Sts>', '<Sts>BOOK</Cd>');
    expect(refusal(parseCamt053('crossed.xml', crossed))).toMatch(/^crossed\.xml: does not parse as XML: /);
    expect(refusal(parseCamt053('empty.xml', ''))).toBe(
      'empty.xml: does not parse as XML: 1:0: document must contain a root element.',
    );
    expect(refusal(parseCamt053('latin.xml', Buffer.from([0x3c, 0x61, 0xe9, 0x3e])))).toBe(
      'latin.xml: is not UTF-8 text',
    );
  });

  it('refuses a DOCTYPE (no entity of a file is ever expanded)', () => {
    const doctype = V02.replace('<Document', '<!DOCTYPE Document [<!ENTITY x "y">]>\n<Document');
    expect(refusal(parseCamt053('dtd.xml', doctype))).toBe(
      'dtd.xml: has a DOCTYPE: a camt.053 file has none',
    );
  });

  it('names the entry and the rule of a bad amount, indicator or status', () => {
    const entry = 'statement 1 (Id STMT-20261127-1), entry 2 (AcctSvcrRef BNK-20261127-0002)';
    expect(refusal(parseCamt053('x.xml', V02.replace('>250.00<', '>250.001<')))).toBe(
      `x.xml: ${entry}: Amt: at most 2 decimals for EUR (got "250.001")`,
    );
    expect(refusal(parseCamt053('x.xml', V02.replace('>250.00<', '>2.5E2<')))).toBe(
      `x.xml: ${entry}: Amt: must be a decimal number (digits, an optional point) (got "2.5E2")`,
    );
    expect(
      refusal(parseCamt053('x.xml', V02.replace('<CdtDbtInd>DBIT</CdtDbtInd>', '<CdtDbtInd>D</CdtDbtInd>'))),
    ).toBe(`x.xml: ${entry}: CdtDbtInd must be CRDT or DBIT (got "D")`);
    expect(
      refusal(parseCamt053('x.xml', V02.replace('<RvslInd>true</RvslInd>', '<RvslInd>yes</RvslInd>'))),
    ).toBe(`x.xml: ${entry}: RvslInd must be true or false (got "yes")`);
    const status = V02.replace(
      '<Sts>BOOK</Sts>\n        <BookgDt>\n          <Dt>2026-11-27</Dt>\n        </BookgDt>\n        <ValDt>\n          <Dt>2026-11-26',
      '<Sts>HELD</Sts>\n        <BookgDt>\n          <Dt>2026-11-27</Dt>\n        </BookgDt>\n        <ValDt>\n          <Dt>2026-11-26',
    );
    expect(refusal(parseCamt053('x.xml', status))).toBe(
      `x.xml: ${entry}: Sts must be BOOK, PDNG, FUTR or INFO (got "HELD")`,
    );
    expect(
      refusal(
        parseCamt053('x.xml', V02.replace('<Amt Ccy="EUR">250.00</Amt>', '<Amt Ccy="USD">250.00</Amt>')),
      ),
    ).toBe(`x.xml: ${entry}: Amt/@Ccy USD differs from the statement's currency EUR`);
  });

  it('refuses a document without a statement and a statement without an account id', () => {
    const start = V02.indexOf('<Stmt>');
    const end = V02.indexOf('</Stmt>') + '</Stmt>'.length;
    expect(refusal(parseCamt053('x.xml', V02.slice(0, start) + V02.slice(end)))).toBe(
      'x.xml: holds no statement (Stmt)',
    );
    expect(
      refusal(parseCamt053('x.xml', V02.replace('<IBAN>DE89370400440532013000</IBAN>', '<Prxy>x</Prxy>'))),
    ).toBe('x.xml: statement 1 (Id STMT-20261127-1): Acct/Id has neither IBAN nor Othr/Id');
  });

  it('refuses a statement without an opening or closing balance, and a repeated AcctSvcrRef', () => {
    expect(refusal(parseCamt053('x.xml', V02.replace('<Cd>PRCD</Cd>', '<Cd>ITBD</Cd>')))).toBe(
      'x.xml: statement 1 (Id STMT-20261127-1): has no opening balance (OPBD or PRCD)',
    );
    expect(refusal(parseCamt053('x.xml', V02.replace('<Cd>CLBD</Cd>', '<Cd>ITBD</Cd>')))).toBe(
      'x.xml: statement 1 (Id STMT-20261127-1): has no closing balance (CLBD)',
    );
    expect(refusal(parseCamt053('x.xml', V02.replace('BNK-20261127-0002', 'BNK-20261127-0001')))).toBe(
      'x.xml: statement 1 (Id STMT-20261127-1), account DE89370400440532013000, entry 2 (AcctSvcrRef ' +
        'BNK-20261127-0001): its reference BNK-20261127-0001 repeats entry 1 (AcctSvcrRef BNK-20261127-0001): ' +
        'a reference names one entry',
    );
  });
});
