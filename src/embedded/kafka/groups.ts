/**
 * The group coordinator: JoinGroup / SyncGroup / Heartbeat / LeaveGroup and the member-session state
 * machine (Empty, PreparingRebalance, CompletingRebalance, Stable). A join completes as soon as every
 * known member has rejoined, or at the largest rebalance timeout, dropping those still absent.
 */
import { randomUUID } from 'node:crypto';
import type { Struct } from './codec.ts';
import { ERR } from './messages.ts';

export type GroupState = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable';

interface Protocol {
  readonly name: string;
  readonly metadata: Buffer;
}

interface Member {
  readonly id: string;
  readonly clientId: string;
  readonly clientHost: string;
  groupInstanceId: string | null;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  protocols: Protocol[];
  assignment: Buffer;
  joinWaiter?: ((r: Struct) => void) | undefined;
  syncWaiter?: ((r: Struct) => void) | undefined;
  sessionTimer?: NodeJS.Timeout | undefined;
}

interface Group {
  readonly id: string;
  state: GroupState;
  generation: number;
  protocolType: string | null;
  protocolName: string | null;
  leaderId: string | null;
  readonly members: Map<string, Member>;
  /** Member ids handed out with MEMBER_ID_REQUIRED and not yet used. */
  readonly pending: Map<string, NodeJS.Timeout>;
  rebalanceTimer?: NodeJS.Timeout | undefined;
}

export interface JoinRequest {
  readonly groupId: string;
  readonly sessionTimeoutMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly memberId: string;
  readonly groupInstanceId: string | null;
  readonly protocolType: string;
  readonly protocols: Protocol[];
}

export interface GroupSummary {
  readonly groupId: string;
  readonly state: GroupState | 'Dead';
  readonly protocolType: string;
  readonly protocolName: string;
  readonly members: {
    memberId: string;
    clientId: string;
    clientHost: string;
    memberMetadata: Buffer;
    memberAssignment: Buffer;
  }[];
}

const MIN_SESSION_MS = 1000;
const MAX_SESSION_MS = 3_600_000;

export class GroupCoordinator {
  private readonly groups = new Map<string, Group>();
  private closed = false;

  private group(id: string): Group {
    let g = this.groups.get(id);
    if (!g) {
      g = {
        id,
        state: 'Empty',
        generation: 0,
        protocolType: null,
        protocolName: null,
        leaderId: null,
        members: new Map(),
        pending: new Map(),
      };
      this.groups.set(id, g);
    }
    return g;
  }

  join(req: JoinRequest, version: number, clientId: string, clientHost: string): Promise<Struct> | Struct {
    const fail = (errorCode: number, memberId = req.memberId) => ({
      errorCode,
      generationId: -1,
      protocolName: '',
      leader: '',
      memberId,
      members: [],
    });
    if (!req.groupId) return fail(ERR.INVALID_GROUP_ID);
    if (req.sessionTimeoutMs < MIN_SESSION_MS || req.sessionTimeoutMs > MAX_SESSION_MS) {
      return fail(ERR.INVALID_SESSION_TIMEOUT);
    }
    if (req.protocols.length === 0 || !req.protocolType) return fail(ERR.INCONSISTENT_GROUP_PROTOCOL);
    const g = this.group(req.groupId);
    if (g.members.size > 0) {
      const others = [...g.members.values()].filter((m) => m.id !== req.memberId);
      const common = req.protocols.some((p) =>
        others.every((m) => m.protocols.some((q) => q.name === p.name)),
      );
      if (g.protocolType !== req.protocolType || !common) return fail(ERR.INCONSISTENT_GROUP_PROTOCOL);
    }
    let memberId = req.memberId;
    if (!memberId) {
      memberId = `${clientId || 'member'}-${randomUUID()}`;
      if (version >= 4) {
        const ttl = setTimeout(() => g.pending.delete(memberId), req.sessionTimeoutMs);
        ttl.unref();
        g.pending.set(memberId, ttl);
        return fail(ERR.MEMBER_ID_REQUIRED, memberId);
      }
    } else if (!g.members.has(memberId) && !g.pending.has(memberId)) {
      return fail(ERR.UNKNOWN_MEMBER_ID);
    }
    const ttl = g.pending.get(memberId);
    if (ttl) {
      clearTimeout(ttl);
      g.pending.delete(memberId);
    }
    let member = g.members.get(memberId);
    if (!member) {
      member = {
        id: memberId,
        clientId,
        clientHost,
        groupInstanceId: req.groupInstanceId,
        sessionTimeoutMs: req.sessionTimeoutMs,
        rebalanceTimeoutMs: req.rebalanceTimeoutMs,
        protocols: req.protocols,
        assignment: Buffer.alloc(0),
      };
      g.members.set(memberId, member);
    }
    member.sessionTimeoutMs = req.sessionTimeoutMs;
    member.rebalanceTimeoutMs = req.rebalanceTimeoutMs > 0 ? req.rebalanceTimeoutMs : req.sessionTimeoutMs;
    member.protocols = req.protocols;
    member.groupInstanceId = req.groupInstanceId;
    g.protocolType = req.protocolType;
    member.joinWaiter?.(fail(ERR.REBALANCE_IN_PROGRESS, memberId));
    const joined = member;
    const result = new Promise<Struct>((resolve) => {
      joined.joinWaiter = resolve;
    });
    this.touch(g, member);
    this.prepareRebalance(g);
    this.maybeCompleteJoin(g);
    return result;
  }

  sync(
    groupId: string,
    generationId: number,
    memberId: string,
    assignments: { memberId: string; assignment: Buffer }[],
  ): Promise<Struct> | Struct {
    const fail = (errorCode: number) => ({ errorCode, assignment: Buffer.alloc(0) });
    const g = this.groups.get(groupId);
    const member = g?.members.get(memberId);
    if (!g || !member) return fail(ERR.UNKNOWN_MEMBER_ID);
    if (generationId !== g.generation) return fail(ERR.ILLEGAL_GENERATION);
    this.touch(g, member);
    if (g.state === 'PreparingRebalance') return fail(ERR.REBALANCE_IN_PROGRESS);
    if (g.state === 'Stable') return { errorCode: 0, assignment: member.assignment };
    if (memberId === g.leaderId) {
      const byMember = new Map(assignments.map((a) => [a.memberId, a.assignment]));
      g.state = 'Stable';
      for (const m of g.members.values()) {
        m.assignment = byMember.get(m.id) ?? Buffer.alloc(0);
        const waiter = m.syncWaiter;
        m.syncWaiter = undefined;
        waiter?.({ errorCode: 0, assignment: m.assignment });
      }
      return { errorCode: 0, assignment: member.assignment };
    }
    member.syncWaiter?.(fail(ERR.REBALANCE_IN_PROGRESS));
    return new Promise((resolve) => {
      member.syncWaiter = resolve;
    });
  }

  heartbeat(groupId: string, generationId: number, memberId: string): number {
    const g = this.groups.get(groupId);
    const member = g?.members.get(memberId);
    if (!g || !member) return ERR.UNKNOWN_MEMBER_ID;
    if (generationId !== g.generation) return ERR.ILLEGAL_GENERATION;
    this.touch(g, member);
    if (g.state === 'PreparingRebalance') return ERR.REBALANCE_IN_PROGRESS;
    return ERR.NONE;
  }

  /** Removes members; returns an error code per member id (UNKNOWN_MEMBER_ID when not in the group). */
  leave(groupId: string, memberIds: string[]): number[] {
    const g = this.groups.get(groupId);
    const codes = memberIds.map((id) => {
      const m = g?.members.get(id);
      if (!g || !m) return ERR.UNKNOWN_MEMBER_ID;
      this.remove(g, m);
      return ERR.NONE;
    });
    if (g && codes.some((c) => c === ERR.NONE)) this.afterRemoval(g);
    return codes;
  }

  /** The error an OffsetCommit from this member gets (generation -1 commits only into an empty group). */
  checkCommit(groupId: string, generationId: number, memberId: string): number {
    const g = this.groups.get(groupId);
    if (!g || g.members.size === 0) {
      return generationId < 0 ? ERR.NONE : memberId ? ERR.UNKNOWN_MEMBER_ID : ERR.NONE;
    }
    if (generationId < 0 && !memberId) return ERR.NONE;
    const member = g.members.get(memberId);
    if (!member) return ERR.UNKNOWN_MEMBER_ID;
    if (generationId !== g.generation) return ERR.ILLEGAL_GENERATION;
    if (g.state === 'CompletingRebalance') return ERR.REBALANCE_IN_PROGRESS;
    this.touch(g, member);
    return ERR.NONE;
  }

  describe(groupId: string): GroupSummary {
    const g = this.groups.get(groupId);
    if (!g) return { groupId, state: 'Dead', protocolType: '', protocolName: '', members: [] };
    return {
      groupId,
      state: g.state,
      protocolType: g.protocolType ?? '',
      protocolName: g.protocolName ?? '',
      members: [...g.members.values()].map((m) => ({
        memberId: m.id,
        clientId: m.clientId,
        clientHost: m.clientHost,
        memberMetadata: m.protocols.find((p) => p.name === g.protocolName)?.metadata ?? Buffer.alloc(0),
        memberAssignment: m.assignment,
      })),
    };
  }

  list(): { groupId: string; protocolType: string }[] {
    return [...this.groups.values()].map((g) => ({ groupId: g.id, protocolType: g.protocolType ?? '' }));
  }

  close(): void {
    this.closed = true;
    for (const g of this.groups.values()) {
      clearTimeout(g.rebalanceTimer);
      for (const t of g.pending.values()) clearTimeout(t);
      for (const m of g.members.values()) clearTimeout(m.sessionTimer);
    }
  }

  private touch(g: Group, m: Member): void {
    clearTimeout(m.sessionTimer);
    if (this.closed) return;
    m.sessionTimer = setTimeout(() => this.expire(g, m), m.sessionTimeoutMs);
    m.sessionTimer.unref();
  }

  private expire(g: Group, m: Member): void {
    if (g.members.get(m.id) !== m) return;
    // A member parked in a join or sync is waiting on the others; the rebalance timeout covers it.
    if (m.joinWaiter || m.syncWaiter) {
      this.touch(g, m);
      return;
    }
    this.remove(g, m);
    this.afterRemoval(g);
  }

  private remove(g: Group, m: Member): void {
    clearTimeout(m.sessionTimer);
    g.members.delete(m.id);
    const join = m.joinWaiter;
    const sync = m.syncWaiter;
    m.joinWaiter = undefined;
    m.syncWaiter = undefined;
    join?.({
      errorCode: ERR.UNKNOWN_MEMBER_ID,
      generationId: -1,
      protocolName: '',
      leader: '',
      memberId: m.id,
      members: [],
    });
    sync?.({ errorCode: ERR.UNKNOWN_MEMBER_ID, assignment: Buffer.alloc(0) });
  }

  private afterRemoval(g: Group): void {
    if (g.members.size === 0) {
      clearTimeout(g.rebalanceTimer);
      g.rebalanceTimer = undefined;
      if (g.state !== 'Empty') g.generation++;
      g.state = 'Empty';
      g.leaderId = null;
      g.protocolName = null;
      return;
    }
    this.prepareRebalance(g);
    this.maybeCompleteJoin(g);
  }

  private prepareRebalance(g: Group): void {
    if (g.state === 'PreparingRebalance') return;
    if (g.state === 'CompletingRebalance') {
      for (const m of g.members.values()) {
        const waiter = m.syncWaiter;
        m.syncWaiter = undefined;
        waiter?.({ errorCode: ERR.REBALANCE_IN_PROGRESS, assignment: Buffer.alloc(0) });
      }
    }
    g.state = 'PreparingRebalance';
    const timeout = Math.max(...[...g.members.values()].map((m) => m.rebalanceTimeoutMs), 1000);
    clearTimeout(g.rebalanceTimer);
    g.rebalanceTimer = setTimeout(() => this.completeJoin(g), timeout);
    g.rebalanceTimer.unref();
  }

  private maybeCompleteJoin(g: Group): void {
    if (g.state !== 'PreparingRebalance') return;
    for (const m of g.members.values()) if (!m.joinWaiter) return;
    this.completeJoin(g);
  }

  private completeJoin(g: Group): void {
    clearTimeout(g.rebalanceTimer);
    g.rebalanceTimer = undefined;
    for (const m of [...g.members.values()]) if (!m.joinWaiter) this.remove(g, m);
    if (g.members.size === 0) {
      this.afterRemoval(g);
      return;
    }
    const members = [...g.members.values()];
    const candidates = members[0]!.protocols
      .map((p) => p.name)
      .filter((name) => members.every((m) => m.protocols.some((p) => p.name === name)));
    const votes = new Map<string, number>();
    for (const m of members) {
      const first = m.protocols.find((p) => candidates.includes(p.name));
      if (first) votes.set(first.name, (votes.get(first.name) ?? 0) + 1);
    }
    let protocol = candidates[0] ?? '';
    for (const name of candidates) if ((votes.get(name) ?? 0) > (votes.get(protocol) ?? 0)) protocol = name;
    g.generation++;
    g.protocolName = protocol;
    if (!g.leaderId || !g.members.has(g.leaderId)) g.leaderId = members[0]!.id;
    g.state = 'CompletingRebalance';
    const all = members.map((m) => ({
      memberId: m.id,
      groupInstanceId: m.groupInstanceId,
      metadata: m.protocols.find((p) => p.name === protocol)?.metadata ?? Buffer.alloc(0),
    }));
    for (const m of members) {
      const waiter = m.joinWaiter;
      m.joinWaiter = undefined;
      m.assignment = Buffer.alloc(0);
      this.touch(g, m);
      waiter?.({
        errorCode: 0,
        generationId: g.generation,
        protocolName: protocol,
        leader: g.leaderId,
        memberId: m.id,
        members: m.id === g.leaderId ? all : [],
      });
    }
  }
}
