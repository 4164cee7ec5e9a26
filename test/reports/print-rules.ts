/**
 * Which print rule each sheet of the two workbooks declares, by sheet name, for the print tests.
 */
import {
  EXCEPTION_DETAIL_PRINT,
  EXCEPTION_SUMMARY_PRINT,
  LATE_PRINT,
} from '../../src/reports/exception-workbook.ts';
import {
  BOOK_PRINT,
  ENTITY_PRINT,
  JOURNAL_PRINT,
  SETTLEMENTS_PRINT,
  SUMMARY_PRINT,
} from '../../src/reports/settlement-workbook.ts';
import type { PrintRule } from '../../src/reports/sheet-writer.ts';

/** The rule of a settlement workbook's sheet. */
export function settlementRule(sheet: string): PrintRule {
  if (sheet === 'Summary' || sheet.startsWith('Summary ')) return SUMMARY_PRINT;
  if (/^(Deposits|Cashouts|Refunds)( \(\d+\))?$/.test(sheet)) return ENTITY_PRINT;
  if (/^Settlements( \(\d+\))?$/.test(sheet)) return SETTLEMENTS_PRINT;
  if (/journal/i.test(sheet)) return JOURNAL_PRINT;
  if (/ book$/.test(sheet)) return BOOK_PRINT;
  throw new Error(`no print rule for settlement sheet "${sheet}"`);
}

/** The rule of an exception workbook's sheet. */
export function exceptionRule(sheet: string): PrintRule {
  if (sheet === 'Summary') return EXCEPTION_SUMMARY_PRINT;
  if (sheet.startsWith('Exceptions')) return EXCEPTION_DETAIL_PRINT;
  if (sheet.startsWith('Late rejections')) return LATE_PRINT;
  throw new Error(`no print rule for exception sheet "${sheet}"`);
}
