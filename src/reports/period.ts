/**
 * Business days and report periods in the configured time zone. A business day D ends at the first
 * cut-off (local wall time, e.g. `18:00`) after D's midnight and starts where D-1 ended: with cut-off
 * `00:00` business day D is the calendar day D; with `18:00` it runs from D-1 18:00 to D 18:00. A period
 * `from..to` (dates, both inclusive) runs from the start of business day `from` to the end of `to`.
 * No date library: offsets come from `Intl.DateTimeFormat`, so daylight-saving changes are honoured.
 */
import { AppError } from '../domain/errors.ts';

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME_RE = /^([01]\d|2[0-3]):([0-5]\d)$/;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Local wall-clock fields of an instant in a time zone. */
export function zonedParts(
  instant: Date,
  timeZone: string,
): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const parts = formatter(timeZone).formatToParts(instant);
  const get = (type: string): number => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return {
    year: get('year'),
    month: get('month'),
    day: get('day'),
    hour: get('hour') % 24,
    minute: get('minute'),
    second: get('second'),
  };
}

// Offsets change only at transitions, which fall on whole quarter hours in every zone; caching per
// quarter hour keeps Intl out of the per-row path of a million-row workbook.
const QUARTER_HOUR = 900_000;
const offsetCache = new Map<string, number>();

/** Offset of the time zone from UTC at an instant, in milliseconds (local minus UTC). */
let lastZone = '';
let lastBucket = Number.NaN;
let lastOffset = 0;

export function zoneOffsetMs(instant: Date, timeZone: string): number {
  const bucket = Math.floor(instant.getTime() / QUARTER_HOUR);
  if (bucket === lastBucket && timeZone === lastZone) return lastOffset;
  const key = `${timeZone}|${bucket}`;
  let offset = offsetCache.get(key);
  if (offset === undefined) {
    const at = new Date(bucket * QUARTER_HOUR);
    const p = zonedParts(at, timeZone);
    offset = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - at.getTime();
    if (offsetCache.size > 50_000) offsetCache.clear();
    offsetCache.set(key, offset);
  }
  lastZone = timeZone;
  lastBucket = bucket;
  lastOffset = offset;
  return offset;
}

/** The instant at which the local wall clock in `timeZone` shows the given date and time. */
export function zonedTimeToInstant(date: string, time: string, timeZone: string): Date {
  const d = DATE_RE.exec(date);
  const t = TIME_RE.exec(time);
  if (!d || !t) throw new AppError('VALIDATION_FAILED', `invalid date or time: ${date} ${time}`);
  const wall = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]), Number(t[1]), Number(t[2]));
  let instant = wall - zoneOffsetMs(new Date(wall), timeZone);
  const second = wall - zoneOffsetMs(new Date(instant), timeZone);
  if (second !== instant) instant = second;
  return new Date(instant);
}

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

/** `YYYY-MM-DD` of an instant in a time zone. */
export function localDate(instant: Date, timeZone: string): string {
  const p = zonedParts(instant, timeZone);
  return `${p.year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
}

/** Adds days to a `YYYY-MM-DD` date. */
export function addDays(date: string, days: number): string {
  const d = DATE_RE.exec(date);
  if (!d) throw new AppError('VALIDATION_FAILED', `invalid date: ${date}`);
  const t = new Date(Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]) + days));
  return t.toISOString().slice(0, 10);
}

export function isIsoDate(text: string): boolean {
  const d = DATE_RE.exec(text);
  if (!d) return false;
  const t = new Date(Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3])));
  return t.toISOString().slice(0, 10) === text;
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
  if (!TIME_RE.test(cutoff)) throw new AppError('VALIDATION_FAILED', `cut-off must be HH:MM (got ${cutoff})`);
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
