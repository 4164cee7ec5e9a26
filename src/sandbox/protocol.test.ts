import { describe, expect, it } from 'vitest';
import { headerError, IdempotencyStore } from './protocol.ts';

describe('IdempotencyStore', () => {
  it('replays the first answer for the same key and body, conflicts on another body, forgets the oldest keys', async () => {
    const store = new IdempotencyStore(2);
    let calls = 0;
    const compute = async () => ({ status: 200, body: { n: ++calls } });
    const conflict = () => headerError(104);
    expect((await store.run('s', 'k1', 'a', conflict, compute)).body).toEqual({ n: 1 });
    expect((await store.run('s', 'k1', 'a', conflict, compute)).body).toEqual({ n: 1 });
    expect((await store.run('s', 'k1', 'b', conflict, compute)).body).toMatchObject({ code: 104 });
    expect((await store.run('other', 'k1', 'b', conflict, compute)).body).toEqual({ n: 2 });
    expect((await store.run('s', undefined, 'a', conflict, compute)).body).toEqual({ n: 3 });
    await store.run('s', 'k2', 'a', conflict, compute);
    expect(store.size).toBe(2);
    // k1 of scope s was the oldest and is forgotten: the key is new again.
    expect((await store.run('s', 'k1', 'b', conflict, compute)).body).toEqual({ n: 5 });
  });
});
