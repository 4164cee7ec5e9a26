/**
 * Local dates and wall-clock instants in an IANA time zone, with `Intl` only (no time-zone library), so
 * daylight-saving changes are honoured: report periods, business days and the sandbox's settlement
 * cut-offs all count days here.
 */
import { AppError } from './errors.ts';

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

/** True when `text` is a wall time `HH:MM`. */
export function isWallTime(text: string): boolean {
  return TIME_RE.test(text);
}

/** True when `text` is a real calendar date `YYYY-MM-DD`. */
export function isIsoDate(text: string): boolean {
  const d = DATE_RE.exec(text);
  if (!d) return false;
  const t = new Date(Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3])));
  return t.toISOString().slice(0, 10) === text;
}

/** True when `timeZone` is an IANA zone this runtime knows. */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** ISO weekday of a calendar date: 1 Monday ... 7 Sunday. */
export function isoWeekday(date: string): number {
  const d = new Date(`${date}T00:00:00Z`).getUTCDay();
  return d === 0 ? 7 : d;
}
