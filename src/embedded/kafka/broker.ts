/**
 * A single-node broker speaking the Kafka wire protocol, for the local run and tests (production uses
 * real Kafka). It advertises the API versions kafkajs 2.2 and librdkafka 2.0 need, stores batches
 * verbatim in segment files, keeps committed offsets and topic metadata on disk, and coordinates
 * consumer groups. Never imports the app: logging goes through the optional `log` callback.
 *
 * Security as a managed Kafka has it: with `tls` the port speaks only TLS (a plaintext client fails its
 * handshake); with `sasl` a connection must authenticate (SaslHandshake, then SaslAuthenticate with
 * PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, `sasl.ts`) before any request but ApiVersions, and is closed
 * after a failed authentication or any other request, as Kafka does. CreatePartitions raises partition
 * counts; CreateTopics refuses a replication factor above its single broker.
 *
 * Whoever can reach the port cannot make it hold much: a frame's size is checked from its 4-byte header,
 * before anything of it is kept, against a small limit until the connection has authenticated (without
 * SASL: until its first request); connections are capped, closed when they do not authenticate in time
 * or stay idle; and a connection is not read while its answers wait unwritten (the client does not read
 * them) or too many of its requests are in progress.
 */
import net from 'node:net';
import tls from 'node:tls';
import { decode, encode, Reader, type Struct, Writer } from './codec.ts';
import { GroupCoordinator } from './groups.ts';
import { InvalidBatchError, type PartitionLog } from './log.ts';
import { API, APIS, ERR } from './messages.ts';
import {
  SASL_MECHANISMS,
  type SaslExchange,
  SaslFailure,
  type SaslMechanism,
  type SaslUsers,
} from './sasl.ts';
import { isValidTopicName, OffsetStore, type Topic, TopicStore } from './store.ts';

export type BrokerLog = (
  level: 'info' | 'warn' | 'error',
  msg: string,
  fields?: Record<string, unknown>,
) => void;

export interface BrokerOptions {
  /** Interface to listen on and the host advertised in Metadata (default 127.0.0.1). */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  readonly dataDir: string;
  /** Partitions of auto-created topics and of CreateTopics with -1 (default 1). */
  readonly defaultPartitions?: number;
  /** Create unknown topics on Metadata and Produce (default true). */
  readonly autoCreateTopics?: boolean;
  /** Per-partition size limit, -1 for none (default -1). */
  readonly retentionBytes?: number;
  /** Age limit of a segment's newest write, -1 for none (default 7 days). */
  readonly retentionMs?: number;
  /** Segment roll size (default 64 MiB). */
  readonly segmentBytes?: number;
  /** How often retention runs (default 60 s). */
  readonly retentionCheckMs?: number;
  /** Cap on one Fetch response's record bytes whatever the client asks, bounding memory (default 8 MiB). */
  readonly fetchMaxBytes?: number;
  /** Largest accepted request frame once authenticated (default 100 MiB). */
  readonly maxFrameBytes?: number;
  /**
   * Largest accepted request frame before the connection has authenticated with SASL, or, without SASL,
   * of its first request (default 64 KiB; clients open with ApiVersions and SASL exchanges are small).
   */
  readonly maxPreAuthFrameBytes?: number;
  /** Connections served at once; more are closed as they arrive (default 1024). */
  readonly maxConnections?: number;
  /**
   * Time a connection has to authenticate with SASL, or, without SASL, to send its first request
   * (default 10 s).
   */
  readonly authTimeoutMs?: number;
  /** A connection with no traffic and no request in progress for this long is closed (default 10 min). */
  readonly idleTimeoutMs?: number;
  /** Requests of one connection in progress at once; the connection is not read beyond (default 16). */
  readonly maxInFlightRequests?: number;
  /** Answers waiting to be written to one connection above which it is not read (default 1 MiB). */
  readonly writeHighWaterBytes?: number;
  /**
   * Users of SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. When set, a connection must authenticate
   * (SaslHandshake v1, then SaslAuthenticate) before any request but ApiVersions.
   */
  readonly sasl?: SaslUsers;
  /**
   * Serve TLS (PEM certificate chain and key) on the port instead of plaintext; with `clientCa`, only
   * clients presenting a certificate signed by it connect (mutual TLS).
   */
  readonly tls?: {
    readonly cert: string | Buffer;
    readonly key: string | Buffer;
    readonly clientCa?: string | Buffer;
  };
  readonly log?: BrokerLog;
}

export interface RunningBroker {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

const NODE_ID = 1;
const CLUSTER_ID = 'payrecon-embedded';

/** Per-connection SASL state. */
interface Conn {
  readonly clientHost: string;
  mechanism: SaslMechanism | null;
  exchange: SaslExchange | null;
  authenticated: boolean;
  /** Close the connection once the queued responses are written (a failed authentication). */
  closeAfterReply: boolean;
  /** A first request was read: without SASL, the end of the pre-authentication frame limit. */
  opened: boolean;
}

interface Ctx {
  readonly clientId: string;
  readonly clientHost: string;
  readonly version: number;
  readonly conn: Conn;
}

/** APIs a connection may use before it has authenticated. */
const PRE_AUTH_APIS: ReadonlySet<number> = new Set([
  API.ApiVersions,
  API.SaslHandshake,
  API.SaslAuthenticate,
]);

interface ParkedFetch {
  readonly keys: string[];
  readonly minBytes: number;
  readonly respond: () => void;
  /** Recomputes the answer; returns the record bytes it would carry. */
  readonly probe: () => number;
}

/** Group-commits fsyncs: every caller in the same tick shares one fdatasync round. */
class Syncer {
  private running: Promise<void> | null = null;
  private next: Promise<void> | null = null;

  constructor(private readonly flushAll: () => Promise<void>) {}

  sync(): Promise<void> {
    if (this.next) return this.next;
    const after = this.running ?? new Promise<void>((r) => setImmediate(r));
    this.next = after.then(() => {
      this.next = null;
      this.running = this.flushAll().finally(() => {
        this.running = null;
      });
      return this.running;
    });
    return this.next;
  }

  async idle(): Promise<void> {
    await this.next;
    await this.running;
  }
}

const partKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

export async function startBroker(options: BrokerOptions): Promise<RunningBroker> {
  const host = options.host ?? '127.0.0.1';
  const log: BrokerLog = options.log ?? (() => {});
  const defaultPartitions = options.defaultPartitions ?? 1;
  const autoCreate = options.autoCreateTopics ?? true;
  const maxFrame = options.maxFrameBytes ?? 100 * 1024 * 1024;
  const maxPreAuthFrame = Math.min(options.maxPreAuthFrameBytes ?? 64 * 1024, maxFrame);
  const authTimeoutMs = options.authTimeoutMs ?? 10_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 600_000;
  const maxInFlight = Math.max(1, options.maxInFlightRequests ?? 16);
  const writeHighWater = options.writeHighWaterBytes ?? 1024 * 1024;
  const fetchMaxBytes = options.fetchMaxBytes ?? 8 * 1024 * 1024;
  const topics = new TopicStore(options.dataDir, {
    segmentBytes: options.segmentBytes ?? 64 * 1024 * 1024,
    retentionBytes: options.retentionBytes ?? -1,
    retentionMs: options.retentionMs ?? 7 * 24 * 3600 * 1000,
  });
  const offsets = new OffsetStore(options.dataDir);
  const groups = new GroupCoordinator();
  const dirtyLogs = new Set<PartitionLog>();
  const syncer = new Syncer(async () => {
    const logs = [...dirtyLogs];
    dirtyLogs.clear();
    await Promise.all([...logs.map((l) => l.flush()), offsets.flush()]);
  });
  const parked = new Map<string, Set<ParkedFetch>>();
  const sockets = new Set<net.Socket>();
  let producerIdSeq = BigInt(Date.now()) * 1000n;
  let port = options.port ?? 9092;

  const retention = setInterval(() => {
    for (const t of topics.topics.values()) {
      for (const l of t.logs) {
        const n = l.enforceRetention();
        if (n > 0) log('info', 'retention deleted segments', { dir: l.dir, segments: n });
      }
    }
  }, options.retentionCheckMs ?? 60_000);
  retention.unref();

  function getOrCreateTopic(name: string, allowCreate: boolean): Topic | number {
    const existing = topics.topics.get(name);
    if (existing) return existing;
    if (!isValidTopicName(name)) return ERR.INVALID_TOPIC_EXCEPTION;
    if (!allowCreate) return ERR.UNKNOWN_TOPIC_OR_PARTITION;
    log('info', 'auto-creating topic', { topic: name, partitions: defaultPartitions });
    return topics.create(name, defaultPartitions);
  }

  function wake(key: string): void {
    const waiting = parked.get(key);
    if (!waiting) return;
    for (const p of [...waiting]) if (p.probe() >= p.minBytes) p.respond();
  }

  function metadataTopic(t: Topic | number, name: string): Struct {
    if (typeof t === 'number') return { errorCode: t, name, isInternal: false, partitions: [] };
    return {
      errorCode: 0,
      name,
      isInternal: false,
      partitions: t.logs.map((_, i) => ({
        errorCode: 0,
        partitionIndex: i,
        leaderId: NODE_ID,
        replicaNodes: [NODE_ID],
        isrNodes: [NODE_ID],
        offlineReplicas: [],
      })),
    };
  }

  const handlers: Record<number, (req: Struct, ctx: Ctx) => Struct | Promise<Struct | null> | null> = {
    [API.ApiVersions]: () => ({
      errorCode: 0,
      apiKeys: [...APIS].map(([apiKey, s]) => ({ apiKey, minVersion: s.min, maxVersion: s.max })),
      throttleTimeMs: 0,
    }),

    [API.Metadata]: (req, ctx) => {
      const wanted = req.topics as { name: string }[] | null;
      const allowCreate = autoCreate && (ctx.version < 4 || req.allowAutoTopicCreation === true);
      const list =
        wanted === null || (ctx.version === 0 && wanted.length === 0)
          ? [...topics.topics.values()].map((t) => metadataTopic(t, t.name))
          : wanted.map((w) => metadataTopic(getOrCreateTopic(w.name, allowCreate), w.name));
      return {
        throttleTimeMs: 0,
        brokers: [{ nodeId: NODE_ID, host, port, rack: null }],
        clusterId: CLUSTER_ID,
        controllerId: NODE_ID,
        topics: list,
      };
    },

    [API.Produce]: async (req) => {
      const touched: string[] = [];
      const result = (req.topics as Struct[]).map((t) => ({
        name: t.name,
        partitions: (t.partitions as Struct[]).map((p) => {
          const out = {
            index: p.index,
            errorCode: 0,
            baseOffset: -1,
            logAppendTimeMs: -1,
            logStartOffset: -1,
          };
          const topic = getOrCreateTopic(t.name, autoCreate);
          if (typeof topic === 'number') return { ...out, errorCode: topic };
          const partLog = topic.logs[p.index as number];
          if (!partLog) return { ...out, errorCode: ERR.UNKNOWN_TOPIC_OR_PARTITION };
          if (!p.records) return { ...out, errorCode: ERR.CORRUPT_MESSAGE };
          try {
            const base = partLog.append(p.records as Buffer);
            dirtyLogs.add(partLog);
            touched.push(partKey(t.name, p.index));
            return { ...out, baseOffset: base, logStartOffset: partLog.startOffset };
          } catch (err) {
            if (err instanceof InvalidBatchError) return { ...out, errorCode: ERR.CORRUPT_MESSAGE };
            log('error', 'append failed', { topic: t.name, partition: p.index, err: String(err) });
            return { ...out, errorCode: ERR.KAFKA_STORAGE_ERROR };
          }
        }),
      }));
      for (const key of touched) wake(key);
      if (req.acks === 0) return null;
      if (req.acks === -1 && touched.length > 0) await syncer.sync();
      return { topics: result, throttleTimeMs: 0 };
    },

    [API.Fetch]: (req, ctx) => {
      const maxBytes = Math.min(fetchMaxBytes, ctx.version >= 3 ? (req.maxBytes as number) : fetchMaxBytes);
      const build = (): { body: Struct; bytes: number } => {
        let remaining = maxBytes;
        let bytes = 0;
        const responses = (req.topics as Struct[]).map((t) => ({
          topic: t.topic,
          partitions: (t.partitions as Struct[]).map((p) => {
            const out = {
              partitionIndex: p.partition,
              errorCode: 0,
              highWatermark: -1,
              lastStableOffset: -1,
              logStartOffset: -1,
              abortedTransactions: ctx.version >= 4 ? [] : null,
              preferredReadReplica: -1,
              records: null as Buffer | null,
            };
            const partLog = topics.topics.get(t.topic)?.logs[p.partition as number];
            if (!partLog) return { ...out, errorCode: ERR.UNKNOWN_TOPIC_OR_PARTITION };
            const offset = Number(p.fetchOffset);
            const end = partLog.endOffset;
            const marks = { highWatermark: end, lastStableOffset: end, logStartOffset: partLog.startOffset };
            if (offset < partLog.startOffset || offset > end) {
              return { ...out, ...marks, errorCode: ERR.OFFSET_OUT_OF_RANGE };
            }
            let records: Buffer = Buffer.alloc(0);
            if (offset < end && remaining > 0) {
              records = partLog.read(offset, Math.min(p.partitionMaxBytes as number, remaining));
              remaining -= records.length;
              bytes += records.length;
            }
            return { ...out, ...marks, records };
          }),
        }));
        return { body: { throttleTimeMs: 0, errorCode: 0, sessionId: 0, responses }, bytes };
      };
      const first = build();
      const minBytes = Math.max(1, req.minBytes as number);
      if (first.bytes >= minBytes || (req.maxWaitMs as number) <= 0) return first.body;
      return new Promise<Struct>((resolve) => {
        const keys = (req.topics as Struct[]).flatMap((t) =>
          (t.partitions as Struct[]).map((p) => partKey(t.topic, p.partition)),
        );
        let last: { body: Struct; bytes: number } | null = null;
        const entry: ParkedFetch = {
          keys,
          minBytes,
          probe: () => {
            last = build();
            return last.bytes;
          },
          respond: () => {
            clearTimeout(timer);
            for (const k of keys) {
              const set = parked.get(k);
              set?.delete(entry);
              if (set?.size === 0) parked.delete(k);
            }
            resolve((last ?? build()).body);
          },
        };
        const timer = setTimeout(() => {
          last = null;
          entry.respond();
        }, req.maxWaitMs as number);
        for (const k of keys) {
          let set = parked.get(k);
          if (!set) {
            set = new Set();
            parked.set(k, set);
          }
          set.add(entry);
        }
      });
    },

    [API.ListOffsets]: (req) => ({
      throttleTimeMs: 0,
      topics: (req.topics as Struct[]).map((t) => ({
        name: t.name,
        partitions: (t.partitions as Struct[]).map((p) => {
          const partLog = topics.topics.get(t.name)?.logs[p.partitionIndex as number];
          if (!partLog) {
            return {
              partitionIndex: p.partitionIndex,
              errorCode: ERR.UNKNOWN_TOPIC_OR_PARTITION,
              timestamp: -1,
              offset: -1,
            };
          }
          const ts = Number(p.timestamp);
          const offset =
            ts === -1 ? partLog.endOffset : ts === -2 ? partLog.startOffset : partLog.offsetForTimestamp(ts);
          return { partitionIndex: p.partitionIndex, errorCode: 0, timestamp: -1, offset };
        }),
      })),
    }),

    [API.FindCoordinator]: () => ({
      throttleTimeMs: 0,
      errorCode: 0,
      errorMessage: null,
      nodeId: NODE_ID,
      host,
      port,
    }),

    [API.JoinGroup]: (req, ctx) =>
      groups.join(
        {
          groupId: req.groupId,
          sessionTimeoutMs: req.sessionTimeoutMs,
          rebalanceTimeoutMs: ctx.version >= 1 ? req.rebalanceTimeoutMs : req.sessionTimeoutMs,
          memberId: req.memberId,
          groupInstanceId: req.groupInstanceId,
          protocolType: req.protocolType,
          protocols: req.protocols,
        },
        ctx.version,
        ctx.clientId,
        ctx.clientHost,
      ),

    [API.SyncGroup]: async (req) => ({
      throttleTimeMs: 0,
      ...(await groups.sync(req.groupId, req.generationId, req.memberId, req.assignments)),
    }),

    [API.Heartbeat]: (req) => ({
      throttleTimeMs: 0,
      errorCode: groups.heartbeat(req.groupId, req.generationId, req.memberId),
    }),

    [API.LeaveGroup]: (req, ctx) => {
      const leaving =
        ctx.version >= 3 ? (req.members as Struct[]) : [{ memberId: req.memberId, groupInstanceId: null }];
      const codes = groups.leave(
        req.groupId,
        leaving.map((m) => m.memberId as string),
      );
      return {
        throttleTimeMs: 0,
        errorCode: ctx.version >= 3 ? 0 : (codes[0] ?? 0),
        members: leaving.map((m, i) => ({ ...m, errorCode: codes[i] ?? 0 })),
      };
    },

    [API.OffsetCommit]: (req, ctx) => {
      const check =
        ctx.version === 0 ? ERR.NONE : groups.checkCommit(req.groupId, req.generationId, req.memberId);
      const entries: Parameters<OffsetStore['commit']>[0] = [];
      const result = (req.topics as Struct[]).map((t) => ({
        name: t.name,
        partitions: (t.partitions as Struct[]).map((p) => {
          if (check !== ERR.NONE) return { partitionIndex: p.partitionIndex, errorCode: check };
          entries.push({
            group: req.groupId,
            topic: t.name,
            partition: p.partitionIndex,
            offset: Number(p.committedOffset),
            metadata: p.committedMetadata,
          });
          return { partitionIndex: p.partitionIndex, errorCode: 0 };
        }),
      }));
      offsets.commit(entries);
      // Written to the journal (the page cache) before answering, so a broker crash keeps it; the fsync
      // runs in the background like Kafka's own offsets topic, keeping a slow disk off the fetch path.
      if (entries.length > 0) void syncer.sync();
      return { throttleTimeMs: 0, topics: result };
    },

    [API.OffsetFetch]: (req) => {
      const wanted = req.topics as { name: string; partitionIndexes: number[] }[] | null;
      const committed = offsets.list(req.groupId);
      const list =
        wanted ?? [...committed].map(([name, parts]) => ({ name, partitionIndexes: [...parts.keys()] }));
      return {
        throttleTimeMs: 0,
        errorCode: 0,
        topics: list.map((t) => ({
          name: t.name,
          partitions: t.partitionIndexes.map((p) => {
            const c = committed.get(t.name)?.get(p);
            return {
              partitionIndex: p,
              committedOffset: c ? c.offset : -1,
              metadata: c ? c.metadata : '',
              errorCode: 0,
            };
          }),
        })),
      };
    },

    [API.CreateTopics]: (req) => ({
      throttleTimeMs: 0,
      topics: (req.topics as Struct[]).map((t) => {
        const name = t.name as string;
        const fail = (errorCode: number, errorMessage: string) => ({ name, errorCode, errorMessage });
        if (!isValidTopicName(name)) return fail(ERR.INVALID_TOPIC_EXCEPTION, `invalid topic name ${name}`);
        if (topics.topics.has(name)) return fail(ERR.TOPIC_ALREADY_EXISTS, `Topic '${name}' already exists.`);
        const assigned = (t.assignments as Struct[]).length;
        const n =
          assigned > 0 ? assigned : t.numPartitions === -1 ? defaultPartitions : (t.numPartitions as number);
        if (n <= 0 || n > 10_000) return fail(ERR.INVALID_PARTITIONS, `invalid partition count ${n}`);
        const rf = t.replicationFactor as number;
        if (assigned === 0 && rf !== -1 && rf !== 1) {
          return fail(
            ERR.INVALID_REPLICATION_FACTOR,
            `Replication factor: ${rf} larger than available brokers: 1.`,
          );
        }
        if (!req.validateOnly) {
          const configs: Record<string, string> = {};
          for (const c of t.configs as Struct[]) if (c.value !== null) configs[c.name] = c.value;
          topics.create(name, n, configs);
          log('info', 'created topic', { topic: name, partitions: n });
        }
        return { name, errorCode: 0, errorMessage: null };
      }),
    }),

    [API.CreatePartitions]: (req) => ({
      throttleTimeMs: 0,
      results: (req.topics as Struct[]).map((t) => {
        const name = t.name as string;
        const count = t.count as number;
        const result = (errorCode: number, errorMessage: string | null) => ({
          name,
          errorCode,
          errorMessage,
        });
        const topic = topics.topics.get(name);
        if (!topic) return result(ERR.UNKNOWN_TOPIC_OR_PARTITION, `The topic '${name}' does not exist.`);
        if (count <= topic.partitions) {
          return result(
            ERR.INVALID_PARTITIONS,
            `Topic currently has ${topic.partitions} partitions, which is higher than the requested ${count}.`,
          );
        }
        if (count > 10_000) return result(ERR.INVALID_PARTITIONS, `invalid partition count ${count}`);
        if (!req.validateOnly) {
          topics.addPartitions(name, count);
          log('info', 'raised partitions', { topic: name, from: topic.partitions, to: count });
        }
        return result(0, null);
      }),
    }),

    [API.DeleteTopics]: (req) => ({
      throttleTimeMs: 0,
      responses: (req.topicNames as string[]).map((name) => {
        const topic = topics.topics.get(name);
        if (topic) for (const l of topic.logs) dirtyLogs.delete(l);
        const deleted = topics.delete(name);
        return { name, errorCode: deleted ? 0 : ERR.UNKNOWN_TOPIC_OR_PARTITION };
      }),
    }),

    [API.SaslHandshake]: (req, ctx) => {
      const mechanism = String(req.mechanism).toUpperCase() as SaslMechanism;
      const enabled = options.sasl ? [...SASL_MECHANISMS] : [];
      if (!enabled.includes(mechanism) || ctx.conn.authenticated) {
        return {
          errorCode: ctx.conn.authenticated ? ERR.ILLEGAL_SASL_STATE : ERR.UNSUPPORTED_SASL_MECHANISM,
          mechanisms: enabled,
        };
      }
      ctx.conn.mechanism = mechanism;
      ctx.conn.exchange = options.sasl!.start(mechanism);
      return { errorCode: 0, mechanisms: enabled };
    },

    [API.SaslAuthenticate]: (req, ctx) => {
      const { conn } = ctx;
      const fail = (errorCode: number, errorMessage: string) => {
        conn.closeAfterReply = true;
        log('warn', 'SASL authentication failed', {
          client: conn.clientHost,
          mechanism: conn.mechanism,
          reason: errorMessage,
        });
        return { errorCode, errorMessage, authBytes: Buffer.alloc(0), sessionLifetimeMs: 0n };
      };
      if (!conn.exchange || conn.authenticated) {
        return fail(ERR.ILLEGAL_SASL_STATE, 'Unexpected SaslAuthenticate: no handshake in progress');
      }
      try {
        const authBytes = conn.exchange.step(req.authBytes as Buffer);
        if (conn.exchange.done) {
          conn.authenticated = true;
          log('info', 'SASL authenticated', {
            client: conn.clientHost,
            mechanism: conn.mechanism,
            user: conn.exchange.user,
          });
        }
        return { errorCode: 0, errorMessage: null, authBytes, sessionLifetimeMs: 0n };
      } catch (err) {
        if (err instanceof SaslFailure) return fail(ERR.SASL_AUTHENTICATION_FAILED, err.message);
        throw err;
      }
    },

    [API.DescribeGroups]: (req) => ({
      throttleTimeMs: 0,
      groups: (req.groups as string[]).map((id) => {
        const g = groups.describe(id);
        const state = g.state === 'Dead' && offsets.hasGroup(id) ? 'Empty' : g.state;
        return {
          errorCode: 0,
          groupId: id,
          groupState: state,
          protocolType: g.protocolType || (state === 'Empty' ? 'consumer' : ''),
          protocolData: g.protocolName,
          members: g.members,
        };
      }),
    }),

    [API.ListGroups]: () => {
      const live = groups.list();
      const known = new Set(live.map((g) => g.groupId));
      const stored = offsets
        .groupIds()
        .filter((id) => !known.has(id))
        .map((groupId) => ({ groupId, protocolType: 'consumer' }));
      return { throttleTimeMs: 0, errorCode: 0, groups: [...live, ...stored] };
    },

    [API.InitProducerId]: () => {
      producerIdSeq += 1n;
      return { throttleTimeMs: 0, errorCode: 0, producerId: producerIdSeq, producerEpoch: 0 };
    },

    [API.DescribeConfigs]: (req) => ({
      throttleTimeMs: 0,
      results: (req.resources as Struct[]).map((r) => {
        const base = { resourceType: r.resourceType, resourceName: r.resourceName, errorMessage: null };
        let entries: { name: string; value: string; own: boolean }[];
        if (r.resourceType === 2) {
          const topic = topics.topics.get(r.resourceName);
          if (!topic) {
            return {
              ...base,
              errorCode: ERR.UNKNOWN_TOPIC_OR_PARTITION,
              errorMessage: 'unknown topic',
              configs: [],
            };
          }
          const effective = topics.logConfig(topic.configs);
          const defaults: Record<string, string> = {
            'cleanup.policy': 'delete',
            'retention.ms': String(effective.retentionMs),
            'retention.bytes': String(effective.retentionBytes),
            'segment.bytes': String(effective.segmentBytes),
          };
          entries = Object.entries({ ...defaults, ...topic.configs }).map(([name, value]) => ({
            name,
            value,
            own: name in topic.configs,
          }));
        } else if (r.resourceType === 4) {
          entries = [
            { name: 'auto.create.topics.enable', value: String(autoCreate), own: false },
            { name: 'num.partitions', value: String(defaultPartitions), own: false },
          ];
        } else {
          return {
            ...base,
            errorCode: ERR.INVALID_REQUEST,
            errorMessage: 'unsupported resource type',
            configs: [],
          };
        }
        const keys = r.configurationKeys as string[] | null;
        return {
          ...base,
          errorCode: 0,
          configs: entries
            .filter((e) => keys === null || keys.length === 0 || keys.includes(e.name))
            .map((e) => ({
              name: e.name,
              value: e.value,
              readOnly: false,
              isDefault: !e.own,
              configSource: e.own ? 1 : 5,
              isSensitive: false,
              synonyms: [],
            })),
        };
      }),
    }),
  };

  function apiVersionsFallback(correlationId: number): Buffer[] {
    // librdkafka opens with ApiVersions v3 (flexible); a v0 body with UNSUPPORTED_VERSION that lists
    // what we support makes it retry with v2.
    const w = new Writer().int32(0).int32(correlationId);
    encode(APIS.get(API.ApiVersions)!.response, w, 0, {
      errorCode: ERR.UNSUPPORTED_VERSION,
      apiKeys: [...APIS].map(([apiKey, s]) => ({ apiKey, minVersion: s.min, maxVersion: s.max })),
    });
    return finish(w);
  }

  /** Fills in the size prefix (the writer's first 4 bytes) and returns the frame's pieces. */
  function finish(w: Writer): Buffer[] {
    const parts = w.chunks();
    parts[0]!.writeInt32BE(w.length - 4, 0);
    return parts;
  }

  async function handle(frame: Buffer, conn: Conn): Promise<Buffer[] | null> {
    const r = new Reader(frame);
    const apiKey = r.int16();
    const version = r.int16();
    const correlationId = r.int32();
    if (!conn.authenticated && !PRE_AUTH_APIS.has(apiKey)) {
      // Kafka closes a connection that sends anything else before authenticating.
      log('warn', 'request before SASL authentication, closing connection', {
        client: conn.clientHost,
        apiKey,
      });
      conn.closeAfterReply = true;
      return null;
    }
    const spec = APIS.get(apiKey);
    if (apiKey === API.ApiVersions && version > (spec?.max ?? 0)) return apiVersionsFallback(correlationId);
    if (!spec || version < spec.min || version > spec.max) {
      log('warn', 'unsupported request', { apiKey, version });
      // Not parseable: answer with the error code where every v0 response puts its first int16.
      return finish(new Writer().int32(0).int32(correlationId).int16(ERR.UNSUPPORTED_VERSION));
    }
    const clientId = r.nstring() ?? '';
    const req = decode(spec.request, r, version);
    const body = await handlers[apiKey]!(req, { clientId, clientHost: conn.clientHost, version, conn });
    if (body === null) return null;
    return finish(encode(spec.response, new Writer(1024).int32(0).int32(correlationId), version, body));
  }

  function serve(socket: net.Socket): void {
    sockets.add(socket);
    socket.setNoDelay(true);
    const conn: Conn = {
      clientHost: socket.remoteAddress ?? '',
      mechanism: null,
      exchange: null,
      authenticated: !options.sasl,
      closeAfterReply: false,
      opened: false,
    };
    const trusted = () => conn.authenticated && (options.sasl !== undefined || conn.opened);
    const authTimer = setTimeout(() => {
      if (trusted()) return;
      log(
        'warn',
        options.sasl
          ? 'no SASL authentication in time, closing connection'
          : 'no request in time, closing connection',
        {
          client: conn.clientHost,
          ms: authTimeoutMs,
        },
      );
      socket.destroy();
    }, authTimeoutMs);
    authTimer.unref();
    socket.setTimeout(idleTimeoutMs);
    socket.on('timeout', () => {
      // A request in progress (a parked Fetch) is the broker's own wait, not the client's idleness.
      if (outQueue.length > 0) {
        socket.setTimeout(idleTimeoutMs);
        return;
      }
      socket.destroy();
    });
    const chunks: Buffer[] = [];
    let buffered = 0;
    let paused = false;
    // Responses leave in request order, as Kafka guarantees per connection.
    const outQueue: { buf: Buffer[] | null; done: boolean }[] = [];
    /** Not read further while its answers wait unwritten or too many of its requests are in progress. */
    const blocked = () => outQueue.length >= maxInFlight || socket.writableLength > writeHighWater;
    const drain = () => {
      socket.cork();
      while (outQueue.length > 0 && outQueue[0]!.done) {
        const head = outQueue.shift()!;
        if (head.buf && !socket.destroyed) for (const part of head.buf) socket.write(part);
      }
      socket.uncork();
      if (conn.closeAfterReply && outQueue.length === 0) socket.end();
      else pump();
    };
    /** Takes the complete frames buffered so far, as long as the connection is not blocked. */
    const pump = () => {
      while (buffered >= 4 && !conn.closeAfterReply && !socket.destroyed) {
        if (blocked()) {
          if (!paused) {
            paused = true;
            socket.pause();
          }
          return;
        }
        if (chunks[0]!.length < 4) {
          const joined = Buffer.concat(chunks, buffered);
          chunks.length = 0;
          chunks.push(joined);
        }
        const size = chunks[0]!.readInt32BE(0);
        const limit = trusted() ? maxFrame : maxPreAuthFrame;
        if (size < 8 || size > limit) {
          log('warn', 'bad frame size, closing connection', {
            client: conn.clientHost,
            size,
            limit,
            authenticated: trusted(),
          });
          socket.destroy();
          return;
        }
        if (buffered < size + 4) break;
        const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, buffered);
        const frame = data.subarray(4, size + 4);
        const rest = data.subarray(size + 4);
        chunks.length = 0;
        if (rest.length > 0) chunks.push(rest);
        buffered = rest.length;
        conn.opened = true;
        const slot: { buf: Buffer[] | null; done: boolean } = { buf: null, done: false };
        outQueue.push(slot);
        handle(frame, conn)
          .then((buf) => {
            slot.buf = buf;
          })
          .catch((err: unknown) => {
            log('error', 'request failed', { err: err instanceof Error ? err.message : String(err) });
            const correlationId = frame.length >= 8 ? frame.readInt32BE(4) : 0;
            slot.buf = finish(new Writer().int32(0).int32(correlationId).int16(ERR.CORRUPT_MESSAGE));
          })
          .finally(() => {
            slot.done = true;
            drain();
          });
      }
      if (paused && !blocked()) {
        paused = false;
        socket.resume();
      }
    };
    socket.on('data', (chunk) => {
      if (conn.closeAfterReply) return;
      chunks.push(chunk);
      buffered += chunk.length;
      pump();
    });
    socket.on('drain', pump);
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(authTimer);
      sockets.delete(socket);
    });
  }

  const server = options.tls
    ? tls.createServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          minVersion: 'TLSv1.2',
          handshakeTimeout: authTimeoutMs,
          ...(options.tls.clientCa
            ? { ca: options.tls.clientCa, requestCert: true, rejectUnauthorized: true }
            : {}),
        },
        serve,
      )
    : net.createServer(serve);
  server.maxConnections = options.maxConnections ?? 1024;
  let refused = 0;
  let refusedLogged = 0;
  server.on('drop', () => {
    // One line per ten seconds at most, however fast connections are refused.
    refused++;
    if (Date.now() - refusedLogged < 10_000) return;
    refusedLogged = Date.now();
    log('warn', 'connection limit reached, refusing connections', {
      maxConnections: server.maxConnections,
      refusedSinceLastLine: refused,
    });
    refused = 0;
  });
  server.on('tlsClientError', (err: Error & { code?: string }, socket: net.Socket) => {
    log('warn', 'TLS handshake failed', { client: socket.remoteAddress, code: err.code ?? err.message });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as net.AddressInfo).port;
  log('info', 'broker listening', {
    host,
    port,
    dataDir: options.dataDir,
    tls: options.tls !== undefined,
    sasl: options.sasl ? [...SASL_MECHANISMS] : [],
  });

  let closing: Promise<void> | null = null;
  return {
    host,
    port,
    close() {
      closing ??= (async () => {
        clearInterval(retention);
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const s of sockets) s.destroy();
        for (const set of parked.values()) for (const p of [...set]) p.respond();
        groups.close();
        await stopped;
        await syncer.idle();
        for (const l of topics.topics.values()) for (const p of l.logs) await p.flush();
        await offsets.flush();
        topics.close();
        offsets.close();
        log('info', 'broker stopped', { port });
      })();
      return closing;
    },
  };
}
