import type { AppliedEntry, HistoryItem } from '../../domain/effects.ts';
import type { LinkedIntent } from './intents.ts';

/** An entity's history and bookings as this process wrote them, and the mirror row version it wrote. */
export interface KnownEntity {
  /** The `version` of the mirror row written in the same transaction as these rows. */
  version: string;
  history: readonly HistoryItem[];
  applied: readonly AppliedEntry[];
  /**
   * The intent that version links (its `intent_id`; null: none), when it cannot have changed since: an
   * intent naming its entity id is never updated again (`insertIntents` completes only a pending record,
   * one without an entity id). Undefined: the intent is read with the row.
   */
  intent?: LinkedIntent | null;
}

/** The linked intent as `KnownEntity.intent` may keep it: null, or one whose row never changes again. */
export function settledIntent(intent: LinkedIntent | null): LinkedIntent | null | undefined {
  return intent === null || intent.entityId !== null ? intent : undefined;
}

/**
 * What a long-running writer (the reconciler, the bench) knows of the entities it wrote last: their
 * histories and booked entries, each with the `version` of the mirror row written with them. Every write
 * of an entity's history or entries writes its mirror row in the same transaction (`writeBatch`), and a
 * version is never given twice (a sequence's value), so while the row read is still that version nobody
 * has added to them since, and `loadBatch` skips reading them again; any other version (another process
 * wrote the entity, this transaction rolled back) reads them from the tables. Bounded: the least recently
 * written entities are forgotten first. One per database.
 */
export class EntityStateCache {
  private readonly entities = new Map<string, KnownEntity>();
  /**
   * The walk of the entities in the order they were set, oldest first, by which the full cache forgets
   * them: kept from one call to the next, since every entity before its place has been forgotten or set
   * again (after it). A new walk from the start skips each entry deleted since the map last rebuilt its
   * table, and a full cache deletes one per entity it sets: a millisecond per batch of 500 entities.
   */
  private oldest: Iterator<string> | null = null;
  constructor(readonly capacity = 20_000) {}

  get(key: string): KnownEntity | undefined {
    return this.entities.get(key);
  }

  set(key: string, known: KnownEntity): void {
    this.entities.delete(key);
    this.entities.set(key, known);
    if (this.entities.size > this.capacity) {
      let oldest = this.oldest?.next();
      if (oldest === undefined || oldest.done) {
        this.oldest = this.entities.keys();
        oldest = this.oldest.next();
      }
      if (!oldest.done) this.entities.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.entities.delete(key);
  }

  get size(): number {
    return this.entities.size;
  }
}
