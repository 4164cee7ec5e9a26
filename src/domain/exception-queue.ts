/**
 * The exception queue's vocabulary: the states an exception is worked through and the
 * age buckets it is filtered and reported by. The database CHECK (`exceptions_state_ck`), the page,
 * the API's zod enums and the workbook derive from these lists.
 */

/** open: nobody looked yet; in_review: someone works it; acknowledged: known and accepted; resolved: done. */
export const EXCEPTION_STATES = ['open', 'in_review', 'acknowledged', 'resolved'] as const;
export type ExceptionState = (typeof EXCEPTION_STATES)[number];

/** States that still need someone (everything but resolved). */
export const UNRESOLVED_STATES = [
  'open',
  'in_review',
  'acknowledged',
] as const satisfies readonly ExceptionState[];

/**
 * The states an exception may be moved from into `in_review` and into `acknowledged` (a resolve starts
 * from any state but resolved); the page's buttons and the database's conditional update agree on these.
 */
export const MOVE_FROM = {
  in_review: ['open', 'acknowledged'],
  acknowledged: ['open', 'in_review'],
} as const satisfies Partial<Record<ExceptionState, readonly ExceptionState[]>>;

/** Age buckets of the queue, by time since first seen: [minDays, maxDays). */
export const AGE_BUCKETS = [
  { key: 'lt1d', label: 'under 1 day', minDays: 0, maxDays: 1 },
  { key: '1to3d', label: '1–3 days', minDays: 1, maxDays: 3 },
  { key: '3to7d', label: '3–7 days', minDays: 3, maxDays: 7 },
  { key: 'gt7d', label: 'over 7 days', minDays: 7, maxDays: Number.POSITIVE_INFINITY },
] as const;
export type AgeBucketKey = (typeof AGE_BUCKETS)[number]['key'];
export const AGE_BUCKET_KEYS = AGE_BUCKETS.map((b) => b.key) as [AgeBucketKey, ...AgeBucketKey[]];
