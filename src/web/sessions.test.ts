import { describe, expect, it } from 'vitest';
import { newSessionToken, passwordFingerprint, Slots, sha256Hex } from './sessions.ts';

describe('Slots', () => {
  it('runs at most `max` tasks at once, queues a few, refuses the rest, then takes the queued in order', async () => {
    const slots = new Slots(2, 2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const gates: (() => void)[] = [];
    const task = (n: number) => () =>
      new Promise<number>((resolve) => {
        running += 1;
        most = Math.max(most, running);
        order.push(n);
        gates.push(() => {
          running -= 1;
          resolve(n);
        });
      });
    const runs = [1, 2, 3, 4].map((n) => slots.run(task(n)));
    // Two run, two wait; a fifth finds the queue full.
    expect(await slots.run(task(5))).toBeNull();
    expect(order).toEqual([1, 2]);
    while (gates.length > 0 || order.length < 4) {
      const open = gates.shift();
      if (open) open();
      await new Promise((r) => setImmediate(r));
    }
    expect((await Promise.all(runs)).map((r) => r?.value)).toEqual([1, 2, 3, 4]);
    expect(order).toEqual([1, 2, 3, 4]);
    expect(most).toBe(2);
    // A task that throws gives its slot back.
    await expect(slots.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await slots.run(async () => 'after')).toEqual({ value: 'after' });
  });
});

describe('session tokens', () => {
  it('names a row by the SHA-256 of a random token; a password is kept as the SHA-256 of its hash', () => {
    const a = newSessionToken();
    const b = newSessionToken();
    expect(a.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(a.id).toBe(sha256Hex(a.token));
    expect(a.id).not.toBe(b.id);
    expect(passwordFingerprint('scrypt$16384$8$1$a$b')).toMatch(/^[0-9a-f]{64}$/);
    expect(passwordFingerprint('scrypt$16384$8$1$a$b')).not.toBe(passwordFingerprint('scrypt$16384$8$1$a$c'));
  });
});
