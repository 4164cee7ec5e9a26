import { afterEach, describe, expect, it } from 'vitest';
import type { Struct } from '../../../src/embedded/kafka/codec.ts';
import { GroupCoordinator, type JoinRequest } from '../../../src/embedded/kafka/groups.ts';
import { ERR } from '../../../src/embedded/kafka/messages.ts';
import { waitFor } from '../../helpers/wait.ts';

const coordinators: GroupCoordinator[] = [];
afterEach(() => {
  for (const c of coordinators.splice(0)) c.close();
});
function coordinator(): GroupCoordinator {
  const c = new GroupCoordinator();
  coordinators.push(c);
  return c;
}

function joinReq(memberId: string, extra: Partial<JoinRequest> = {}): JoinRequest {
  return {
    groupId: 'g',
    sessionTimeoutMs: 1000,
    rebalanceTimeoutMs: 5000,
    memberId,
    groupInstanceId: null,
    protocolType: 'consumer',
    protocols: [{ name: 'RoundRobinAssigner', metadata: Buffer.from('meta') }],
    ...extra,
  };
}

/** JoinGroup v5: the first call hands out a member id, the second joins with it. */
async function join(c: GroupCoordinator, clientId: string, extra: Partial<JoinRequest> = {}) {
  const first = (await c.join(joinReq('', extra), 5, clientId, '127.0.0.1')) as Struct;
  expect(first.errorCode).toBe(ERR.MEMBER_ID_REQUIRED);
  return {
    memberId: first.memberId as string,
    joined: c.join(joinReq(first.memberId, extra), 5, clientId, '127.0.0.1'),
  };
}

describe('GroupCoordinator', () => {
  it('completes a join as soon as every known member has rejoined, and elects one leader', async () => {
    const c = coordinator();
    const a = await join(c, 'a');
    const ra = (await a.joined) as Struct;
    expect(ra).toMatchObject({
      errorCode: 0,
      generationId: 1,
      leader: a.memberId,
      protocolName: 'RoundRobinAssigner',
    });
    expect(ra.members).toHaveLength(1);
    await c.sync('g', 1, a.memberId, [{ memberId: a.memberId, assignment: Buffer.from('all') }]);

    // A second member joining moves the group to PreparingRebalance; the first learns it by heartbeat.
    const b = await join(c, 'b');
    expect(c.heartbeat('g', 1, a.memberId)).toBe(ERR.REBALANCE_IN_PROGRESS);
    let bDone = false;
    void Promise.resolve(b.joined).then(() => {
      bDone = true;
    });
    // Whatever b's join resolves on its own has run by the next turn of the event loop; only a's rejoin
    // (or the 5 s rebalance timeout) may complete it.
    await new Promise((r) => setImmediate(r));
    expect(c.describe('g').state).toBe('PreparingRebalance');
    expect(bDone).toBe(false);
    const ra2 = (await c.join(joinReq(a.memberId), 5, 'a', '127.0.0.1')) as Struct;
    const rb2 = (await b.joined) as Struct;
    expect(ra2.generationId).toBe(2);
    expect(rb2.generationId).toBe(2);
    expect(ra2.leader).toBe(a.memberId);
    expect(ra2.members).toHaveLength(2);
    expect(rb2.members).toEqual([]);

    // The follower's SyncGroup waits for the leader's assignment.
    const followerSync = c.sync('g', 2, b.memberId, []);
    const leaderSync = await c.sync('g', 2, a.memberId, [
      { memberId: a.memberId, assignment: Buffer.from('A') },
      { memberId: b.memberId, assignment: Buffer.from('B') },
    ]);
    expect(String((leaderSync as Struct).assignment)).toBe('A');
    expect(String(((await followerSync) as Struct).assignment)).toBe('B');
    expect(c.describe('g').state).toBe('Stable');
    expect(c.heartbeat('g', 2, b.memberId)).toBe(ERR.NONE);
    expect(c.heartbeat('g', 1, b.memberId)).toBe(ERR.ILLEGAL_GENERATION);
    expect(c.heartbeat('g', 2, 'nobody')).toBe(ERR.UNKNOWN_MEMBER_ID);
  });

  it('rebalances at once when a member leaves, and drops a member silent past its session timeout', async () => {
    const c = coordinator();
    const a = await join(c, 'a');
    await a.joined;
    await c.sync('g', 1, a.memberId, []);
    const b = await join(c, 'b');
    const ra = c.join(joinReq(a.memberId), 5, 'a', '127.0.0.1');
    await Promise.all([ra, b.joined]);
    await c.sync('g', 2, a.memberId, []);
    expect(c.describe('g').members).toHaveLength(2);

    expect(c.leave('g', [b.memberId, 'ghost'])).toEqual([ERR.NONE, ERR.UNKNOWN_MEMBER_ID]);
    expect(c.heartbeat('g', 2, a.memberId)).toBe(ERR.REBALANCE_IN_PROGRESS);
    const again = (await c.join(joinReq(a.memberId), 5, 'a', '127.0.0.1')) as Struct;
    expect(again).toMatchObject({ errorCode: 0, generationId: 3 });
    await c.sync('g', 3, a.memberId, []);

    // No heartbeat for longer than the 1 s session timeout: the member is removed and the group empties.
    expect(c.describe('g').members).toHaveLength(1);
    await waitFor('the silent member to be dropped', () => c.describe('g').state === 'Empty', 5_000);
    expect(c.describe('g')).toMatchObject({ state: 'Empty', members: [] });
    expect(c.heartbeat('g', 3, a.memberId)).toBe(ERR.UNKNOWN_MEMBER_ID);
  });

  it('refuses unknown member ids, mismatched protocols, and commits from stale generations', async () => {
    const c = coordinator();
    expect(((await c.join(joinReq('made-up'), 5, 'x', 'h')) as Struct).errorCode).toBe(ERR.UNKNOWN_MEMBER_ID);
    const a = await join(c, 'a');
    await a.joined;
    const other = (await c.join(
      joinReq('', { protocols: [{ name: 'range', metadata: Buffer.alloc(0) }] }),
      5,
      'rdkafka',
      'h',
    )) as Struct;
    expect(other.errorCode).toBe(ERR.INCONSISTENT_GROUP_PROTOCOL);
    expect(c.checkCommit('g', 1, a.memberId)).toBe(ERR.REBALANCE_IN_PROGRESS);
    await c.sync('g', 1, a.memberId, []);
    expect(c.checkCommit('g', 1, a.memberId)).toBe(ERR.NONE);
    expect(c.checkCommit('g', 0, a.memberId)).toBe(ERR.ILLEGAL_GENERATION);
    expect(c.checkCommit('g', 1, 'ghost')).toBe(ERR.UNKNOWN_MEMBER_ID);
    expect(c.checkCommit('empty-group', -1, '')).toBe(ERR.NONE);
    // JoinGroup v3 and below take an empty member id directly.
    const old = (await c.join(joinReq('', { groupId: 'v3' }), 3, 'old', 'h')) as Struct;
    expect(old).toMatchObject({ errorCode: 0, generationId: 1 });
  });

  it('completes a rebalance at the timeout without a member that never rejoins', async () => {
    const c = coordinator();
    const fast = { rebalanceTimeoutMs: 1000, sessionTimeoutMs: 30_000 };
    const a = await join(c, 'a', fast);
    await a.joined;
    await c.sync('g', 1, a.memberId, []);
    const b = await join(c, 'b', fast);
    // `a` keeps heartbeating but never rejoins.
    const t0 = Date.now();
    const rb = (await b.joined) as Struct;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(rb).toMatchObject({ errorCode: 0, generationId: 2, leader: b.memberId });
    expect(c.describe('g').members.map((m) => m.memberId)).toEqual([b.memberId]);
    expect(c.heartbeat('g', 1, a.memberId)).toBe(ERR.UNKNOWN_MEMBER_ID);
  });
});
