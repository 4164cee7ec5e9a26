/**
 * The topic plan operators control: every catalog topic and its `.dlq` companion with the partitions,
 * replication factor, `min.insync.replicas` and `retention.ms` the configuration asks for
 * (KAFKA_TOPIC_PARTITIONS, KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS, KAFKA_RETENTION_MS,
 * per-topic KAFKA_TOPIC_OVERRIDES; unset values fall back to the catalog's partition count and the
 * cluster's defaults).
 *
 * `diffTopicPlan` compares the plan with the cluster; `applyTopicPlan` creates missing topics and
 * raises partition counts. It never lowers a partition count (that would move keys to other partitions
 * and break per-entity order), never deletes a topic, never changes a replication factor (that needs a
 * partition reassignment) nor an existing topic's configs: each of those is reported as refused, with
 * the reason.
 */
import type { Admin, ITopicConfig } from 'kafkajs';
import { AppError } from '../domain/errors.ts';
import { dlqTopicOf, isDlqTopicName, isTopicName, TOPIC_NAMES, TOPICS } from './topics.ts';

export interface TopicOverride {
  readonly partitions?: number;
  readonly replicationFactor?: number;
  readonly minInsyncReplicas?: number;
  readonly retentionMs?: number;
}

/** The plan's settings (payrecon's `config.kafka.topics`). */
export interface TopicPlanSettings {
  readonly partitions: number | null;
  readonly replicationFactor: number | null;
  readonly minInsyncReplicas: number | null;
  readonly retentionMs: number | null;
  readonly overrides: Readonly<Record<string, TopicOverride>>;
  /** false: parts never create topics and check theirs exist at start-up. */
  readonly autoCreate: boolean;
}

export const DEFAULT_TOPIC_PLAN: TopicPlanSettings = {
  partitions: null,
  replicationFactor: null,
  minInsyncReplicas: null,
  retentionMs: null,
  overrides: {},
  autoCreate: true,
};

export interface PlannedTopic {
  readonly name: string;
  readonly partitions: number;
  /** null: the cluster's default. */
  readonly replicationFactor: number | null;
  /** Topic configs the plan sets (`min.insync.replicas`, `retention.ms`). */
  readonly configs: Readonly<Record<string, string>>;
}

/** The planned topics, catalog order, each followed by its DLQ. */
export function plannedTopics(settings: TopicPlanSettings = DEFAULT_TOPIC_PLAN): PlannedTopic[] {
  for (const name of Object.keys(settings.overrides)) {
    if (!isTopicName(name) && !isDlqTopicName(name)) {
      throw new AppError('CONFIG_INVALID', `KAFKA_TOPIC_OVERRIDES.${name}: is not a topic of payrecon`);
    }
  }
  return TOPIC_NAMES.flatMap((topic) => {
    // A DLQ follows its topic's override unless it has its own.
    const base = settings.overrides[topic] ?? {};
    return [topic, dlqTopicOf(topic)].map((name): PlannedTopic => {
      const own = name === topic ? base : { ...base, ...settings.overrides[name] };
      const minIsr = own.minInsyncReplicas ?? settings.minInsyncReplicas;
      const retention = own.retentionMs ?? settings.retentionMs;
      return {
        name,
        partitions: own.partitions ?? settings.partitions ?? TOPICS[topic].partitions,
        replicationFactor: own.replicationFactor ?? settings.replicationFactor ?? null,
        configs: {
          ...(minIsr === null ? {} : { 'min.insync.replicas': String(minIsr) }),
          ...(retention === null ? {} : { 'retention.ms': String(retention) }),
        },
      };
    });
  });
}

export interface ClusterTopic {
  readonly partitions: number;
  readonly replicationFactor: number;
  /** Values of the configs the plan names, as the cluster reports them (null: not reported). */
  readonly configs: Readonly<Record<string, string | null>>;
}

export type TopicAction = 'create' | 'raise-partitions' | 'none';

export interface TopicDiff {
  readonly planned: PlannedTopic;
  /** null: the topic does not exist. */
  readonly current: ClusterTopic | null;
  readonly action: TopicAction;
  /** Differences apply will not change, each with its reason. */
  readonly refused: readonly string[];
}

/** Reads the planned topics from the cluster and compares. */
export async function diffTopicPlan(admin: Admin, plan: readonly PlannedTopic[]): Promise<TopicDiff[]> {
  const existing = new Set(await admin.listTopics());
  const present = plan.filter((p) => existing.has(p.name));
  const current = new Map<string, ClusterTopic>();
  if (present.length > 0) {
    const metadata = await admin.fetchTopicMetadata({ topics: present.map((p) => p.name) });
    const configNames = [...new Set(present.flatMap((p) => Object.keys(p.configs)))];
    const configs = new Map<string, Record<string, string | null>>();
    if (configNames.length > 0) {
      const described = await admin.describeConfigs({
        includeSynonyms: false,
        resources: present.map((p) => ({ type: 2, name: p.name, configNames })),
      });
      for (const r of described.resources) {
        const values: Record<string, string | null> = {};
        for (const e of r.configEntries) values[e.configName] = e.configValue;
        configs.set(r.resourceName, values);
      }
    }
    for (const t of metadata.topics) {
      current.set(t.name, {
        partitions: t.partitions.length,
        replicationFactor: Math.max(0, ...t.partitions.map((p) => p.replicas.length)),
        configs: configs.get(t.name) ?? {},
      });
    }
  }
  return plan.map((planned) => {
    const now = current.get(planned.name) ?? null;
    if (!now) return { planned, current: null, action: 'create', refused: [] };
    const refused: string[] = [];
    if (now.partitions > planned.partitions) {
      refused.push(
        `has ${now.partitions} partitions, the plan ${planned.partitions}: partitions are never reduced (keys would move to other partitions); set the plan to ${now.partitions}`,
      );
    }
    if (planned.replicationFactor !== null && now.replicationFactor !== planned.replicationFactor) {
      refused.push(
        `has replication factor ${now.replicationFactor}, the plan ${planned.replicationFactor}: changing it needs a partition reassignment (kafka-reassign-partitions), not done by payrecon`,
      );
    }
    for (const [name, value] of Object.entries(planned.configs)) {
      const is = now.configs[name] ?? null;
      if (is !== value) {
        refused.push(
          `has ${name}=${is ?? '(not reported)'}, the plan ${value}: configs of existing topics are not changed by payrecon (kafka-configs --alter)`,
        );
      }
    }
    const action: TopicAction = now.partitions < planned.partitions ? 'raise-partitions' : 'none';
    return { planned, current: now, action, refused };
  });
}

export interface ApplyResult {
  readonly created: string[];
  readonly raised: { name: string; from: number; to: number }[];
  /** Changes the cluster refused, per topic (for example a replication factor above its broker count). */
  readonly failed: { name: string; reason: string }[];
}

/** Creates missing topics and raises partition counts; never anything else. */
export async function applyTopicPlan(admin: Admin, diffs: readonly TopicDiff[]): Promise<ApplyResult> {
  const result: ApplyResult = { created: [], raised: [], failed: [] };
  for (const d of diffs.filter((x) => x.action === 'create')) {
    const topic: ITopicConfig = {
      topic: d.planned.name,
      numPartitions: d.planned.partitions,
      ...(d.planned.replicationFactor === null ? {} : { replicationFactor: d.planned.replicationFactor }),
      configEntries: Object.entries(d.planned.configs).map(([name, value]) => ({ name, value })),
    };
    try {
      await admin.createTopics({ topics: [topic], waitForLeaders: true });
      result.created.push(d.planned.name);
    } catch (err) {
      result.failed.push({ name: d.planned.name, reason: kafkaReason(err) });
    }
  }
  for (const d of diffs.filter((x) => x.action === 'raise-partitions')) {
    try {
      await admin.createPartitions({
        topicPartitions: [{ topic: d.planned.name, count: d.planned.partitions }],
      });
      result.raised.push({
        name: d.planned.name,
        from: d.current?.partitions ?? 0,
        to: d.planned.partitions,
      });
    } catch (err) {
      result.failed.push({ name: d.planned.name, reason: kafkaReason(err) });
    }
  }
  return result;
}

function kafkaReason(err: unknown): string {
  const e = err as { errors?: { message?: string }[]; message?: string };
  const inner = e.errors?.map((x) => x.message).filter(Boolean);
  return (inner && inner.length > 0 ? inner.join('; ') : (e.message ?? String(err))).replace(/\s+/g, ' ');
}

/** One line per planned topic: what it is, what the plan wants, what apply would do or refuses. */
export function describeDiff(d: TopicDiff): string[] {
  const p = d.planned;
  const want = [
    `partitions ${p.partitions}`,
    `replication factor ${p.replicationFactor ?? 'cluster default'}`,
    ...Object.entries(p.configs).map(([k, v]) => `${k} ${v}`),
  ].join(', ');
  const lines: string[] = [];
  if (d.action === 'create') lines.push(`${p.name}: missing, create (${want})`);
  else if (d.action === 'raise-partitions') {
    lines.push(`${p.name}: raise partitions ${d.current?.partitions} -> ${p.partitions}`);
  } else if (d.refused.length === 0) lines.push(`${p.name}: as planned (${want})`);
  for (const r of d.refused) lines.push(`${p.name}: refused: ${r}`);
  return lines;
}

/**
 * At start-up: with auto-create on, creates the missing planned topics (and answers their names);
 * with it off, fails naming every missing topic. Differences on existing topics are left to
 * `payrecon topics plan`; `onDifference` hears them.
 */
export async function ensureTopicPlan(
  admin: Admin,
  settings: TopicPlanSettings,
  onDifference: (line: string) => void = () => {},
): Promise<string[]> {
  const diffs = await diffTopicPlan(admin, plannedTopics(settings));
  const missing = diffs.filter((d) => d.action === 'create').map((d) => d.planned.name);
  if (!settings.autoCreate && missing.length > 0) {
    throw new AppError(
      'CONFIG_INVALID',
      `KAFKA_AUTO_CREATE_TOPICS=false: missing topic(s) ${missing.join(', ')} (create them with payrecon topics apply)`,
      { details: { missing } },
    );
  }
  for (const d of diffs) {
    if (d.action === 'raise-partitions') {
      onDifference(
        `${d.planned.name} has ${d.current?.partitions} partitions, the plan ${d.planned.partitions} (payrecon topics apply raises it)`,
      );
    }
    for (const r of d.refused) onDifference(`${d.planned.name} ${r}`);
  }
  if (missing.length === 0) return [];
  const applied = await applyTopicPlan(
    admin,
    diffs.filter((d) => d.action === 'create'),
  );
  // Another part starting at the same moment may have created it first.
  const failed = applied.failed.filter((f) => !/already exists/i.test(f.reason));
  if (failed.length > 0) {
    throw new AppError('CONFIG_INVALID', `creating topic ${failed[0]!.name} failed: ${failed[0]!.reason}`, {
      details: { failed },
    });
  }
  return applied.created;
}
