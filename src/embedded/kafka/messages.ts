/**
 * Request and response declarations for every API and version the broker advertises (see
 * docs/embedded.md). Field lists follow Kafka's `clients/src/main/resources/common/
 * message/*.json`, restricted to the non-flexible versions; a field's `[min, max]` is its version range.
 */
import type { Fields } from './codec.ts';

export const API = {
  Produce: 0,
  Fetch: 1,
  ListOffsets: 2,
  Metadata: 3,
  OffsetCommit: 8,
  OffsetFetch: 9,
  FindCoordinator: 10,
  JoinGroup: 11,
  Heartbeat: 12,
  LeaveGroup: 13,
  SyncGroup: 14,
  DescribeGroups: 15,
  ListGroups: 16,
  SaslHandshake: 17,
  ApiVersions: 18,
  CreateTopics: 19,
  DeleteTopics: 20,
  InitProducerId: 22,
  DescribeConfigs: 32,
  SaslAuthenticate: 36,
  CreatePartitions: 37,
} as const;

/** Kafka error codes the broker answers. */
export const ERR = {
  NONE: 0,
  OFFSET_OUT_OF_RANGE: 1,
  CORRUPT_MESSAGE: 2,
  UNKNOWN_TOPIC_OR_PARTITION: 3,
  INVALID_FETCH_SIZE: 4,
  LEADER_NOT_AVAILABLE: 5,
  MESSAGE_TOO_LARGE: 10,
  COORDINATOR_NOT_AVAILABLE: 15,
  NOT_COORDINATOR: 16,
  INVALID_TOPIC_EXCEPTION: 17,
  ILLEGAL_GENERATION: 22,
  INCONSISTENT_GROUP_PROTOCOL: 23,
  INVALID_GROUP_ID: 24,
  UNKNOWN_MEMBER_ID: 25,
  INVALID_SESSION_TIMEOUT: 26,
  REBALANCE_IN_PROGRESS: 27,
  UNSUPPORTED_SASL_MECHANISM: 33,
  ILLEGAL_SASL_STATE: 34,
  UNSUPPORTED_VERSION: 35,
  TOPIC_ALREADY_EXISTS: 36,
  INVALID_PARTITIONS: 37,
  INVALID_REPLICATION_FACTOR: 38,
  INVALID_REQUEST: 42,
  UNSUPPORTED_FOR_MESSAGE_FORMAT: 43,
  KAFKA_STORAGE_ERROR: 56,
  SASL_AUTHENTICATION_FAILED: 58,
  GROUP_ID_NOT_FOUND: 69,
  MEMBER_ID_REQUIRED: 79,
} as const;

interface ApiSpec {
  readonly min: number;
  readonly max: number;
  readonly request: Fields;
  readonly response: Fields;
}

const int32s = { array: 'int32' } as const;

const produce: ApiSpec = {
  min: 3,
  max: 7,
  request: [
    ['transactionalId', 'nstring', 3],
    ['acks', 'int16'],
    ['timeoutMs', 'int32'],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['index', 'int32'],
                ['records', 'nbytes'],
              ],
            },
          ],
        ],
      },
    ],
  ],
  response: [
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['index', 'int32'],
                ['errorCode', 'int16'],
                ['baseOffset', 'int64'],
                ['logAppendTimeMs', 'int64', 2],
                ['logStartOffset', 'int64', 5],
              ],
            },
          ],
        ],
      },
    ],
    ['throttleTimeMs', 'int32', 1],
  ],
};

const fetch: ApiSpec = {
  min: 4,
  max: 11,
  request: [
    ['replicaId', 'int32'],
    ['maxWaitMs', 'int32'],
    ['minBytes', 'int32'],
    ['maxBytes', 'int32', 3],
    ['isolationLevel', 'int8', 4],
    ['sessionId', 'int32', 7],
    ['sessionEpoch', 'int32', 7],
    [
      'topics',
      {
        array: [
          ['topic', 'string'],
          [
            'partitions',
            {
              array: [
                ['partition', 'int32'],
                ['currentLeaderEpoch', 'int32', 9],
                ['fetchOffset', 'int64'],
                ['logStartOffset', 'int64', 5],
                ['partitionMaxBytes', 'int32'],
              ],
            },
          ],
        ],
      },
    ],
    [
      'forgottenTopics',
      {
        array: [
          ['topic', 'string'],
          ['partitions', int32s],
        ],
      },
      7,
    ],
    ['rackId', 'string', 11],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16', 7],
    ['sessionId', 'int32', 7],
    [
      'responses',
      {
        array: [
          ['topic', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['errorCode', 'int16'],
                ['highWatermark', 'int64'],
                ['lastStableOffset', 'int64', 4],
                ['logStartOffset', 'int64', 5],
                [
                  'abortedTransactions',
                  {
                    array: [
                      ['producerId', 'int64'],
                      ['firstOffset', 'int64'],
                    ],
                    nullable: true,
                  },
                  4,
                ],
                ['preferredReadReplica', 'int32', 11],
                ['records', 'nbytes'],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

const listOffsets: ApiSpec = {
  min: 1,
  max: 3,
  request: [
    ['replicaId', 'int32'],
    ['isolationLevel', 'int8', 2],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['timestamp', 'int64'],
              ],
            },
          ],
        ],
      },
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 2],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['errorCode', 'int16'],
                ['timestamp', 'int64'],
                ['offset', 'int64'],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

const metadata: ApiSpec = {
  min: 0,
  max: 6,
  request: [
    ['topics', { array: [['name', 'string']], nullable: true }],
    ['allowAutoTopicCreation', 'bool', 4],
  ],
  response: [
    ['throttleTimeMs', 'int32', 3],
    [
      'brokers',
      {
        array: [
          ['nodeId', 'int32'],
          ['host', 'string'],
          ['port', 'int32'],
          ['rack', 'nstring', 1],
        ],
      },
    ],
    ['clusterId', 'nstring', 2],
    ['controllerId', 'int32', 1],
    [
      'topics',
      {
        array: [
          ['errorCode', 'int16'],
          ['name', 'string'],
          ['isInternal', 'bool', 1],
          [
            'partitions',
            {
              array: [
                ['errorCode', 'int16'],
                ['partitionIndex', 'int32'],
                ['leaderId', 'int32'],
                ['replicaNodes', int32s],
                ['isrNodes', int32s],
                ['offlineReplicas', int32s, 5],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

const offsetCommit: ApiSpec = {
  min: 0,
  max: 5,
  request: [
    ['groupId', 'string'],
    ['generationId', 'int32', 1],
    ['memberId', 'string', 1],
    ['retentionTimeMs', 'int64', 2, 4],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['committedOffset', 'int64'],
                ['commitTimestamp', 'int64', 1, 1],
                ['committedMetadata', 'nstring'],
              ],
            },
          ],
        ],
      },
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 3],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['errorCode', 'int16'],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

const offsetFetch: ApiSpec = {
  min: 1,
  max: 4,
  request: [
    ['groupId', 'string'],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          ['partitionIndexes', int32s],
        ],
        nullable: true,
      },
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 3],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          [
            'partitions',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['committedOffset', 'int64'],
                ['metadata', 'nstring'],
                ['errorCode', 'int16'],
              ],
            },
          ],
        ],
      },
    ],
    ['errorCode', 'int16', 2],
  ],
};

const findCoordinator: ApiSpec = {
  min: 0,
  max: 2,
  request: [
    ['key', 'string'],
    ['keyType', 'int8', 1],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16'],
    ['errorMessage', 'nstring', 1],
    ['nodeId', 'int32'],
    ['host', 'string'],
    ['port', 'int32'],
  ],
};

const joinGroup: ApiSpec = {
  min: 0,
  max: 5,
  request: [
    ['groupId', 'string'],
    ['sessionTimeoutMs', 'int32'],
    ['rebalanceTimeoutMs', 'int32', 1],
    ['memberId', 'string'],
    ['groupInstanceId', 'nstring', 5],
    ['protocolType', 'string'],
    [
      'protocols',
      {
        array: [
          ['name', 'string'],
          ['metadata', 'bytes'],
        ],
      },
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 2],
    ['errorCode', 'int16'],
    ['generationId', 'int32'],
    ['protocolName', 'string'],
    ['leader', 'string'],
    ['memberId', 'string'],
    [
      'members',
      {
        array: [
          ['memberId', 'string'],
          ['groupInstanceId', 'nstring', 5],
          ['metadata', 'bytes'],
        ],
      },
    ],
  ],
};

const heartbeat: ApiSpec = {
  min: 0,
  max: 3,
  request: [
    ['groupId', 'string'],
    ['generationId', 'int32'],
    ['memberId', 'string'],
    ['groupInstanceId', 'nstring', 3],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16'],
  ],
};

const leaveGroup: ApiSpec = {
  min: 0,
  max: 3,
  request: [
    ['groupId', 'string'],
    ['memberId', 'string', 0, 2],
    [
      'members',
      {
        array: [
          ['memberId', 'string'],
          ['groupInstanceId', 'nstring'],
        ],
      },
      3,
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16'],
    [
      'members',
      {
        array: [
          ['memberId', 'string'],
          ['groupInstanceId', 'nstring'],
          ['errorCode', 'int16'],
        ],
      },
      3,
    ],
  ],
};

const syncGroup: ApiSpec = {
  min: 0,
  max: 3,
  request: [
    ['groupId', 'string'],
    ['generationId', 'int32'],
    ['memberId', 'string'],
    ['groupInstanceId', 'nstring', 3],
    [
      'assignments',
      {
        array: [
          ['memberId', 'string'],
          ['assignment', 'bytes'],
        ],
      },
    ],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16'],
    ['assignment', 'bytes'],
  ],
};

const describeGroups: ApiSpec = {
  min: 0,
  max: 2,
  request: [['groups', { array: 'string' }]],
  response: [
    ['throttleTimeMs', 'int32', 1],
    [
      'groups',
      {
        array: [
          ['errorCode', 'int16'],
          ['groupId', 'string'],
          ['groupState', 'string'],
          ['protocolType', 'string'],
          ['protocolData', 'string'],
          [
            'members',
            {
              array: [
                ['memberId', 'string'],
                ['clientId', 'string'],
                ['clientHost', 'string'],
                ['memberMetadata', 'bytes'],
                ['memberAssignment', 'bytes'],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

const listGroups: ApiSpec = {
  min: 0,
  max: 2,
  request: [],
  response: [
    ['throttleTimeMs', 'int32', 1],
    ['errorCode', 'int16'],
    [
      'groups',
      {
        array: [
          ['groupId', 'string'],
          ['protocolType', 'string'],
        ],
      },
    ],
  ],
};

const apiVersions: ApiSpec = {
  min: 0,
  max: 2,
  request: [],
  response: [
    ['errorCode', 'int16'],
    [
      'apiKeys',
      {
        array: [
          ['apiKey', 'int16'],
          ['minVersion', 'int16'],
          ['maxVersion', 'int16'],
        ],
      },
    ],
    ['throttleTimeMs', 'int32', 1],
  ],
};

const createTopics: ApiSpec = {
  min: 0,
  max: 3,
  request: [
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          ['numPartitions', 'int32'],
          ['replicationFactor', 'int16'],
          [
            'assignments',
            {
              array: [
                ['partitionIndex', 'int32'],
                ['brokerIds', int32s],
              ],
            },
          ],
          [
            'configs',
            {
              array: [
                ['name', 'string'],
                ['value', 'nstring'],
              ],
            },
          ],
        ],
      },
    ],
    ['timeoutMs', 'int32'],
    ['validateOnly', 'bool', 1],
  ],
  response: [
    ['throttleTimeMs', 'int32', 2],
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          ['errorCode', 'int16'],
          ['errorMessage', 'nstring', 1],
        ],
      },
    ],
  ],
};

const deleteTopics: ApiSpec = {
  min: 0,
  max: 1,
  request: [
    ['topicNames', { array: 'string' }],
    ['timeoutMs', 'int32'],
  ],
  response: [
    ['throttleTimeMs', 'int32', 1],
    [
      'responses',
      {
        array: [
          ['name', 'string'],
          ['errorCode', 'int16'],
        ],
      },
    ],
  ],
};

const initProducerId: ApiSpec = {
  min: 0,
  max: 1,
  request: [
    ['transactionalId', 'nstring'],
    ['transactionTimeoutMs', 'int32'],
  ],
  response: [
    ['throttleTimeMs', 'int32'],
    ['errorCode', 'int16'],
    ['producerId', 'int64'],
    ['producerEpoch', 'int16'],
  ],
};

const describeConfigs: ApiSpec = {
  min: 0,
  max: 2,
  request: [
    [
      'resources',
      {
        array: [
          ['resourceType', 'int8'],
          ['resourceName', 'string'],
          ['configurationKeys', { array: 'string', nullable: true }],
        ],
      },
    ],
    ['includeSynonyms', 'bool', 1],
  ],
  response: [
    ['throttleTimeMs', 'int32'],
    [
      'results',
      {
        array: [
          ['errorCode', 'int16'],
          ['errorMessage', 'nstring'],
          ['resourceType', 'int8'],
          ['resourceName', 'string'],
          [
            'configs',
            {
              array: [
                ['name', 'string'],
                ['value', 'nstring'],
                ['readOnly', 'bool'],
                ['isDefault', 'bool', 0, 0],
                ['configSource', 'int8', 1],
                ['isSensitive', 'bool'],
                [
                  'synonyms',
                  {
                    array: [
                      ['name', 'string'],
                      ['value', 'nstring'],
                      ['source', 'int8'],
                    ],
                  },
                  1,
                ],
              ],
            },
          ],
        ],
      },
    ],
  ],
};

/**
 * Advertised from v0 (librdkafka requires v0 in the range to detect SASL support), but the tokens are
 * only served inside SaslAuthenticate, which every client that sees it advertised uses.
 */
const saslHandshake: ApiSpec = {
  min: 0,
  max: 1,
  request: [['mechanism', 'string']],
  response: [
    ['errorCode', 'int16'],
    ['mechanisms', { array: 'string' }],
  ],
};

const saslAuthenticate: ApiSpec = {
  min: 0,
  max: 1,
  request: [['authBytes', 'bytes']],
  response: [
    ['errorCode', 'int16'],
    ['errorMessage', 'nstring'],
    ['authBytes', 'bytes'],
    ['sessionLifetimeMs', 'int64', 1],
  ],
};

const createPartitions: ApiSpec = {
  min: 0,
  max: 1,
  request: [
    [
      'topics',
      {
        array: [
          ['name', 'string'],
          ['count', 'int32'],
          ['assignments', { array: [['brokerIds', int32s]], nullable: true }],
        ],
      },
    ],
    ['timeoutMs', 'int32'],
    ['validateOnly', 'bool'],
  ],
  response: [
    ['throttleTimeMs', 'int32'],
    [
      'results',
      {
        array: [
          ['name', 'string'],
          ['errorCode', 'int16'],
          ['errorMessage', 'nstring'],
        ],
      },
    ],
  ],
};

/** Every advertised API, keyed by api key. */
export const APIS: ReadonlyMap<number, ApiSpec> = new Map<number, ApiSpec>([
  [API.Produce, produce],
  [API.Fetch, fetch],
  [API.ListOffsets, listOffsets],
  [API.Metadata, metadata],
  [API.OffsetCommit, offsetCommit],
  [API.OffsetFetch, offsetFetch],
  [API.FindCoordinator, findCoordinator],
  [API.JoinGroup, joinGroup],
  [API.Heartbeat, heartbeat],
  [API.LeaveGroup, leaveGroup],
  [API.SyncGroup, syncGroup],
  [API.DescribeGroups, describeGroups],
  [API.ListGroups, listGroups],
  [API.ApiVersions, apiVersions],
  [API.CreateTopics, createTopics],
  [API.DeleteTopics, deleteTopics],
  [API.InitProducerId, initProducerId],
  [API.DescribeConfigs, describeConfigs],
  [API.SaslHandshake, saslHandshake],
  [API.SaslAuthenticate, saslAuthenticate],
  [API.CreatePartitions, createPartitions],
]);
