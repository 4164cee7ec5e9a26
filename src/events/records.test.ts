import { describe, expect, it } from 'vitest';
import {
  sampleAlert,
  sampleDlq,
  sampleIntent,
  sampleNotification,
  sampleObservation,
} from '../../test/events/fixtures.ts';
import { AppError } from '../domain/errors.ts';
import { fromRecord, toRecord } from './records.ts';

function schemaError(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('SCHEMA_INVALID');
    return err as AppError;
  }
  throw new Error('expected SCHEMA_INVALID');
}

describe('Avro record conversion', () => {
  it('writes amounts as decimal strings and dates as epoch milliseconds', () => {
    const record = toRecord('provider.status.observed.v1', sampleObservation());
    expect(record.amount).toBe('123456789012345678.99');
    expect(record.fee_amount).toBe('1.50');
    expect(record.observed_at).toBe(Date.parse('2026-11-21T10:15:30.123Z'));
    expect(JSON.parse(record.details as string)).toEqual({ payment_type: 'PIX', nested: { n: 1 } });
  });

  it.each([
    ['provider.status.observed.v1', sampleObservation()],
    ['provider.status.observed.v1', sampleObservation({ amount: null, feeAmount: null, status: null })],
    ['merchant.intent.recorded.v1', sampleIntent()],
    ['merchant.intent.recorded.v1', sampleIntent({ entityId: null, response: null, expectedFee: 5n })],
    ['provider.notification.received.v1', sampleNotification()],
    ['provider.notification.received.v1', sampleNotification({ notificationDate: null, sourceIp: null })],
    ['recon.alert.raised.v1', sampleAlert()],
    ['recon.alert.raised.v1', sampleAlert({ entityKind: null, entityId: null, amount: null })],
    ['provider.status.observed.v1.dlq', sampleDlq()],
  ] as const)('round-trips %s', (topic, value) => {
    expect(fromRecord(topic, toRecord(topic, value as never))).toEqual(value);
  });

  it('names the field of an amount that is not a two-decimal string', () => {
    const record = toRecord('provider.status.observed.v1', sampleObservation());
    const err = schemaError(() =>
      fromRecord('provider.status.observed.v1', { ...record, fee_amount: '1.005' }),
    );
    expect(err.message).toMatch(/field fee_amount/);
    expect(err.details).toMatchObject({ field: 'fee_amount' });
    const negative = schemaError(() =>
      fromRecord('merchant.intent.recorded.v1', {
        ...toRecord('merchant.intent.recorded.v1', sampleIntent()),
        amount: '-1.00',
      }),
    );
    expect(negative.message).toMatch(/field amount/);
  });

  it('names the field of JSON text that is not an object', () => {
    const record = toRecord('merchant.intent.recorded.v1', sampleIntent());
    expect(
      schemaError(() => fromRecord('merchant.intent.recorded.v1', { ...record, request: '{no' })).message,
    ).toMatch(/field request/);
    expect(
      schemaError(() => fromRecord('merchant.intent.recorded.v1', { ...record, response: '[1]' })).message,
    ).toMatch(/field response/);
  });

  it('refuses an invalid Date and a float amount on the way out', () => {
    expect(
      schemaError(() => toRecord('recon.alert.raised.v1', sampleAlert({ raisedAt: new Date(Number.NaN) })))
        .message,
    ).toMatch(/field raised_at/);
    expect(
      schemaError(() => toRecord('recon.alert.raised.v1', sampleAlert({ amount: 1.5 as unknown as bigint })))
        .message,
    ).toMatch(/field amount/);
  });

  it('names the field of an unknown authenticity, severity or entity kind', () => {
    const n = toRecord('provider.notification.received.v1', sampleNotification());
    expect(
      schemaError(() => fromRecord('provider.notification.received.v1', { ...n, authenticity: 'maybe' }))
        .message,
    ).toMatch(/field authenticity/);
    const a = toRecord('recon.alert.raised.v1', sampleAlert());
    expect(schemaError(() => fromRecord('recon.alert.raised.v1', { ...a, severity: 'meh' })).message).toMatch(
      /field severity/,
    );
    expect(
      schemaError(() => fromRecord('recon.alert.raised.v1', { ...a, entity_kind: 'transfer' })).message,
    ).toMatch(/field entity_kind/);
  });

  it('keeps bigint values inside details as text', () => {
    const record = toRecord('recon.alert.raised.v1', sampleAlert({ details: { shortfall: 12n } }));
    expect(JSON.parse(record.details as string)).toEqual({ shortfall: '12' });
  });
});
