/**
 * Business days and report periods in the configured time zone. A business day D ends at the first
 * cut-off (local wall time, e.g. `18:00`) after D's midnight and starts where D-1 ended: with cut-off
 * `00:00` business day D is the calendar day D; with `18:00` it runs from D-1 18:00 to D 18:00. A period
 * `from..to` (dates, both inclusive) runs from the start of business day `from` to the end of `to`.
 * No date library: offsets come from `Intl.DateTimeFormat`, so daylight-saving changes are honoured.
 */
import { AppError } from '../domain/errors.ts';
import {
  addDays,
  isIsoDate,
  isWallTime,
  localDate,
  zonedParts,
  zonedTimeToInstant,
  zoneOffsetMs,
} from '../domain/zoned-time.ts';

/**
 * An Excel cell date showing the instant's local wall time in `timeZone`. Excel dates carry no zone;
 * exceljs writes a Date's UTC fields, so the instant is shifted by the zone's offset.
 */
export function excelDate(instant: Date, timeZone: string): Date {
  return new Date(instant.getTime() + zoneOffsetMs(instant, timeZone));
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** An instant for people, in a title: `24 Nov 2026, 15:30 (America/Sao_Paulo)`; the zone optional. */
export function humanInstant(instant: Date, timeZone: string, withZone = true): string {
  const p = zonedParts(instant, timeZone);
  const hm = `${String(p.hour).padStart(2, '0')}:${String(p.minute).padStart(2, '0')}`;
  return `${p.day} ${MONTHS[p.month - 1]} ${p.year}, ${hm}${withZone ? ` (${timeZone})` : ''}`;
}

/** End of business day `date`: the first cut-off after its local midnight. */
export function businessDayEnd(date: string, cutoff: string, timeZone: string): Date {
  return cutoff === '00:00'
    ? zonedTimeToInstant(addDays(date, 1), '00:00', timeZone)
    : zonedTimeToInstant(date, cutoff, timeZone);
}

export interface Period {
  from: string;
  to: string;
  /** Inclusive start instant. */
  start: Date;
  /** Exclusive end instant. */
  end: Date;
  timeZone: string;
  cutoff: string;
}

/** The period covering business days `from` through `to` (inclusive). */
export function periodOf(from: string, to: string, timeZone: string, cutoff = '00:00'): Period {
  if (!isIsoDate(from) || !isIsoDate(to)) {
    throw new AppError('VALIDATION_FAILED', `period dates must be YYYY-MM-DD (got ${from}, ${to})`);
  }
  if (from > to) throw new AppError('VALIDATION_FAILED', `period start ${from} is after its end ${to}`);
  if (!isWallTime(cutoff)) throw new AppError('VALIDATION_FAILED', `cut-off must be HH:MM (got ${cutoff})`);
  return {
    from,
    to,
    start: businessDayEnd(addDays(from, -1), cutoff, timeZone),
    end: businessDayEnd(to, cutoff, timeZone),
    timeZone,
    cutoff,
  };
}

/** The most recent business day that has ended at or before `now`. */
export function lastClosedBusinessDay(now: Date, cutoff: string, timeZone: string): string {
  let day = localDate(now, timeZone);
  while (businessDayEnd(day, cutoff, timeZone).getTime() > now.getTime()) day = addDays(day, -1);
  return day;
}

/** The month `YYYY-MM` as a period: its first through last business day. */
export function monthPeriod(month: string, timeZone: string, cutoff = '00:00'): Period {
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month)) {
    throw new AppError('VALIDATION_FAILED', `month must be YYYY-MM (got ${month})`);
  }
  const first = `${month}-01`;
  const [y, m] = month.split('-').map(Number) as [number, number];
  const next = m === 12 ? `${y + 1}-01-01` : `${y}-${String(m + 1).padStart(2, '0')}-01`;
  return periodOf(first, addDays(next, -1), timeZone, cutoff);
}

/** The month (`YYYY-MM`) whose business days hold an instant, under the time zone and cut-off. */
export function monthOfInstant(instant: Date, timeZone: string, cutoff = '00:00'): string {
  let day = localDate(instant, timeZone);
  // With a cut-off after midnight, an instant after the day's cut-off belongs to the next business day.
  if (businessDayEnd(day, cutoff, timeZone).getTime() <= instant.getTime()) day = addDays(day, 1);
  return day.slice(0, 7);
}
