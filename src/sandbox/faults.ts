/**
 * Fault settings, seeded and changeable at run time (`PUT /_sandbox/faults`). Endpoint faults apply per
 * endpoint name (see `ENDPOINTS`) with `*` as the fallback; webhook faults apply to every notification;
 * late rejection turns COMPLETED cashouts and refunds REJECTED later with a probability.
 */
import { z } from 'zod';
import type { Rng } from './rng.ts';

export const ENDPOINTS = [
  'deposit.create',
  'deposit.status',
  'card.create',
  'refund.create',
  'refund.status',
  'cashout.create',
  'cashout.status',
  'cashout.update',
  'cashout.cancel',
  'banks',
] as const;
export type EndpointName = (typeof ENDPOINTS)[number];

const rate = z.number().min(0).max(1);

export const endpointFaultsSchema = z.object({
  /** Added latency in real milliseconds: fixed, or [min, max]. */
  latencyMs: z.union([z.number().min(0), z.tuple([z.number().min(0), z.number().min(0)])]).optional(),
  /** Probability of a 5xx answer. */
  errorRate: rate.optional(),
  errorStatus: z.number().int().min(500).max(599).optional(),
  /** Probability of a 429 answer with Retry-After. */
  rateLimitRate: rate.optional(),
  retryAfterSeconds: z.number().int().min(0).optional(),
  /** Probability that the request never gets an answer (the connection hangs). */
  hangRate: rate.optional(),
});
export type EndpointFaults = z.infer<typeof endpointFaultsSchema>;

export const webhookFaultsSchema = z.object({
  /** Probability a notification is never sent. */
  dropRate: rate.default(0),
  /** Probability a notification is sent twice. */
  duplicateRate: rate.default(0),
  /** Extra delay before the first attempt, sandbox milliseconds. */
  delayMs: z.number().min(0).default(0),
  /** Probability a notification is held back `reorderDelayMs` so later ones overtake it. */
  reorderRate: rate.default(0),
  reorderDelayMs: z.number().min(0).default(5000),
});
export type WebhookFaults = z.infer<typeof webhookFaultsSchema>;

export const lateRejectionSchema = z.object({
  cashoutRate: rate.default(0),
  refundRate: rate.default(0),
  /** Sandbox milliseconds between COMPLETED and the late REJECTED (default 3 days). */
  delayMs: z
    .number()
    .min(0)
    .default(3 * 24 * 3600 * 1000),
});

export const faultSettingsSchema = z.object({
  endpoints: z.record(z.string(), endpointFaultsSchema).default({}),
  webhooks: webhookFaultsSchema.default(webhookFaultsSchema.parse({})),
  lateRejection: lateRejectionSchema.default(lateRejectionSchema.parse({})),
});
export type FaultSettings = z.infer<typeof faultSettingsSchema>;

export type FaultDecision =
  | { kind: 'none'; latencyMs: number }
  | { kind: 'error'; latencyMs: number; status: number }
  | { kind: 'rate_limit'; latencyMs: number; retryAfterSeconds: number }
  | { kind: 'hang'; latencyMs: number };

export class Faults {
  settings: FaultSettings;
  /** Told when the settings change (the durable store keeps them). */
  onSettings: () => void = () => {};
  private readonly rng: Rng;

  constructor(rng: Rng, settings: unknown = {}) {
    this.rng = rng;
    this.settings = faultSettingsSchema.parse(settings);
  }

  /** Replaces the settings (validated). */
  set(settings: unknown): FaultSettings {
    this.settings = faultSettingsSchema.parse(settings);
    this.onSettings();
    return this.settings;
  }

  /** True when no endpoint fault is configured (the fast path skips the draw). */
  get quiet(): boolean {
    return Object.keys(this.settings.endpoints).length === 0;
  }

  decide(endpoint: EndpointName): FaultDecision {
    const f = this.settings.endpoints[endpoint] ?? this.settings.endpoints['*'];
    if (!f) return { kind: 'none', latencyMs: 0 };
    let latencyMs = 0;
    if (typeof f.latencyMs === 'number') latencyMs = f.latencyMs;
    else if (f.latencyMs) latencyMs = f.latencyMs[0] + this.rng.next() * (f.latencyMs[1] - f.latencyMs[0]);
    if (this.rng.chance(f.hangRate ?? 0)) return { kind: 'hang', latencyMs };
    if (this.rng.chance(f.rateLimitRate ?? 0)) {
      return { kind: 'rate_limit', latencyMs, retryAfterSeconds: f.retryAfterSeconds ?? 1 };
    }
    if (this.rng.chance(f.errorRate ?? 0)) return { kind: 'error', latencyMs, status: f.errorStatus ?? 503 };
    return { kind: 'none', latencyMs };
  }
}
