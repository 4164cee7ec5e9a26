/**
 * The one `payrecon` command. Each sub-command's action lives with its area (for example
 * `src/sandbox/main.ts`); this file only declares options and wires them. It is the only file that may
 * import both the app and `src/embedded/`.
 */
import { Command, CommanderError } from 'commander';
import { reportFailure, UsageError, verboseRequested } from './cli-errors.ts';
import { requireFile, requireFolderOrParent } from './cli-inputs.ts';
import { requestedLogLevel } from './config.ts';
import { PART_INFO, PART_NAMES } from './parts.ts';

const verbose = verboseRequested(process.argv, requestedLogLevel());
/**
 * Every failure, however it surfaces, leaves through the one error path (src/cli-errors.ts), after
 * stopping any embedded PostgreSQL this process started (payrecon owns its shutdown).
 */
let failing = false;
const fail = (err: unknown) => {
  if (failing) return;
  failing = true;
  const code = reportFailure(err, { verbose });
  import('./embedded/postgres.ts')
    .then((m) => m.stopEmbeddedPostgresServers())
    .catch(() => undefined)
    .finally(() => process.exit(code));
};
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);

export const program = new Command('payrecon')
  .description('Reconciliation pipeline for the Payment Service API v3')
  .version('0.1.0')
  .option('--verbose', 'on failure, print the stack trace too (as does LOG_LEVEL=debug)')
  // Argument errors leave through the one error path too (inherited by every sub-command).
  .exitOverride()
  .configureOutput({ outputError: () => undefined });

// Sub-commands are registered below, one block each, in the order: up, sandbox, broker, registry, db,
// the parts (reconcile, fetch, alerts, relay, poll, ingest, jobs), web, intent, backfill, report.
program
  .command('up')
  .description(
    'Run everything in one process: embedded PostgreSQL, broker and registry unless configured, and the sandbox with traffic when no provider account is configured',
  )
  .option('--traffic <rate>', 'sandbox creations per second (when running against the sandbox)', '2')
  .option('--speed <factor>', 'sandbox clock: provider seconds per real second', '60')
  .action(async (opts) => {
    await (await import('./commands.ts')).runUp(opts, await embeddedStarters());
    // Everything has stopped in order (PostgreSQL last); nothing may keep the process alive.
    process.exit(0);
  });

// One command per part of the registry (src/parts.ts); `up` above starts them all.
for (const part of PART_NAMES) {
  const command = program
    .command(part)
    .description(
      `${PART_INFO[part].description} (production: DATABASE_URL, KAFKA_BROKERS, SCHEMA_REGISTRY_URL)`,
    );
  if (part === 'jobs') {
    command.option('--retention-days <n>', 'keep generated workbooks this many days (default 90)');
  }
  command.action(async (opts) => {
    const { postgres } = await embeddedStarters();
    await (await import('./commands.ts')).runPart(part, opts, { postgres });
    process.exit(0);
  });
}

/** The embedded services, started only by `payrecon up` when their address is not configured. */
async function embeddedStarters(): Promise<import('./infrastructure.ts').EmbeddedStarters> {
  return {
    postgres: async ({ dataDir }) =>
      (await import('./embedded/postgres.ts')).startEmbeddedPostgres({
        dataDir,
        onNotice: (line) => process.stderr.write(`payrecon: ${line}\n`),
      }),
    // Both ask for the data directory's generated credentials: no other process on the host gets in.
    broker: async ({ dataDir, users, logger }) => {
      const { SaslUsers } = await import('./embedded/kafka/sasl.ts');
      const broker = await (await import('./embedded/kafka/broker.ts')).startBroker({
        host: '127.0.0.1',
        port: 0,
        dataDir,
        defaultPartitions: 3,
        sasl: new SaslUsers(users),
        // Refusals (a client without the credentials) are warnings; the broker's routine, debug.
        log: (level, msg, fields) => logger[level === 'info' ? 'debug' : level](fields ?? {}, msg),
      });
      return { host: broker.host, port: broker.port, secured: true, close: () => broker.close() };
    },
    registry: async ({ dataDir, users }) => {
      const registry = await (await import('./embedded/registry/registry.ts')).startRegistry({
        host: '127.0.0.1',
        port: 0,
        dataDir,
        users,
      });
      return { url: registry.url, secured: true, close: () => registry.close() };
    },
  };
}

program
  .command('registry')
  .description('Run the embedded Confluent-compatible schema registry (Avro, durable under --data-dir)')
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option('--port <port>', 'port to listen on (0 picks a free one and prints it)', '8081')
  .option('--data-dir <dir>', 'directory holding the registry log', '.payrecon/registry')
  .option('--users <file>', 'JSON {user: password}: require HTTP basic auth')
  .option('--tls-cert <file>', 'PEM certificate (chain): serve HTTPS (with --tls-key)')
  .option('--tls-key <file>', 'PEM private key of --tls-cert')
  .action(async (opts, command: Command) => {
    checkInputs(command, { users: '--users', tlsCert: '--tls-cert', tlsKey: '--tls-key' });
    await (await import('./embedded/registry/main.ts')).runRegistryCli(opts);
  });

program
  .command('broker')
  .description('Run the embedded Kafka-protocol broker (single node, durable under --data-dir)')
  .option('--host <host>', 'address to listen on and advertise', '127.0.0.1')
  .option('--port <port>', 'port to listen on (0 picks a free one and prints it)', '9092')
  .option('--data-dir <dir>', 'directory holding topics, logs and committed offsets', '.payrecon/broker')
  .option('--partitions <n>', 'partitions of auto-created topics', '1')
  .option('--retention-ms <ms>', 'delete segments older than this (-1 keeps all)')
  .option('--retention-bytes <bytes>', 'per-partition size limit (-1 keeps all)')
  .option('--segment-bytes <bytes>', 'segment roll size')
  .option('--stats-ms <ms>', 'log event-loop delay and memory at this interval')
  .option('--sasl-users <file>', 'JSON {user: password}: require SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512')
  .option('--tls-cert <file>', 'PEM certificate (chain): serve TLS on the port (with --tls-key)')
  .option('--tls-key <file>', 'PEM private key of --tls-cert')
  .option('--tls-client-ca <file>', 'PEM CA: require client certificates it signed (mutual TLS)')
  .action(async (opts, command: Command) => {
    checkInputs(command, {
      saslUsers: '--sasl-users',
      tlsCert: '--tls-cert',
      tlsKey: '--tls-key',
      tlsClientCa: '--tls-client-ca',
    });
    await (await import('./embedded/kafka/main.ts')).runBrokerCli(opts);
  });

program
  .command('sandbox')
  .description('Run the Payment Service API v3 simulator (main API, card API, pages, /_sandbox control API)')
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option('--port <port>', 'main API port (0 picks a free one and prints it)', '8700')
  .option('--cc-port <port>', 'card-data API port (0 picks a free one and prints it)', '8701')
  .option('--seed <n>', 'seed of every random choice', '1')
  .option('--accounts <file>', 'JSON file with more merchant accounts')
  .option('--traffic <rate>', 'generate this many operations per second (turns the automatic mode on)')
  .option('--speed <factor>', 'sandbox seconds per real second', '1')
  .option('--auto', 'move entities automatically along realistic paths')
  .option('--notification-base-url <url>', 'deliver every notification to this base URL (path kept)')
  .option('--notification-url <url>', "default account's notification URL (http allowed)")
  .option('--faults <file>', 'JSON file with fault settings')
  .option('--data-dir <dir>', 'keep the state in this directory across restarts (default: in memory)')
  .action(async (opts, command: Command) => {
    checkInputs(command, { accounts: '--accounts', faults: '--faults' });
    await (await import('./sandbox/main.ts')).runSandboxCli(opts);
  });

/**
 * The files and folders of a command's options, checked before it starts anything: each input file
 * named in `files` must be there, and a `--data-dir` given on the command line must be a folder or the
 * new child of one (the defaults, under the working directory, are created as needed).
 */
function checkInputs(command: Command, files: Record<string, string>): void {
  const opts = command.opts() as Record<string, string | undefined>;
  for (const [key, option] of Object.entries(files)) requireFile(option, opts[key]);
  if (command.getOptionValueSource('dataDir') === 'cli') requireFolderOrParent('--data-dir', opts.dataDir);
}

/**
 * `--user` and `--password-file` of a command that acts as a page user (src/cli-auth.ts): the user is
 * authenticated with `--password-file`, PAYRECON_PASSWORD or a prompt, and its role checked.
 */
function userOptions(command: Command, who: string): Command {
  return command
    .option(
      '--user <name>',
      `${who}: a user of PAYRECON_WEB_USERS, or a sandbox user beside payrecon up (default: $USER)`,
    )
    .option(
      '--password-file <file>',
      "a file (mode 0600) holding the user's password (else PAYRECON_PASSWORD, else asked at a terminal)",
    );
}

/** The configured user a command acts as, authenticated, with the role `permission` needs. */
async function actAs(
  opts: import('./cli-auth.ts').CliUserOptions,
  permission: import('./domain/roles.ts').WebPermission,
  what: string,
): Promise<string> {
  const { loadConfig } = await import('./config.ts');
  return (await (await import('./cli-auth.ts')).actingUser(loadConfig(), opts, permission, what)).username;
}

/** The connection of the commands that only publish (intent, backfill), opened when the command asks. */
async function publisherConnection(): Promise<import('./producers/connect.ts').ConnectPublisher> {
  const { connectPublisher } = await import('./infrastructure.ts');
  const { loadConfig } = await import('./config.ts');
  return (clientId) => connectPublisher(loadConfig(), clientId);
}

/**
 * A command's database, opened on demand: the option, then DATABASE_URL, then the running
 * `payrecon up`'s (`<data dir>/endpoints.json`), then the embedded PostgreSQL under `<data dir>/pg`.
 */
function databaseOpener(command: string, option: string | undefined, optionName = '--database-url') {
  return async () => {
    const { loadConfig } = await import('./config.ts');
    const { chooseDatabase } = await import('./endpoints.ts');
    const config = loadConfig();
    return chooseDatabase({
      option,
      optionName,
      environment: config.database.url,
      dataDir: config.dataDir,
      startEmbedded: async (dataDir) =>
        (await import('./embedded/postgres.ts')).startEmbeddedPostgres({
          dataDir,
          onNotice: (line) => process.stderr.write(`payrecon: ${line}\n`),
        }),
      notice: (line) => process.stderr.write(`payrecon: ${line}\n`),
      command,
    });
  };
}

const topics = program
  .command('topics')
  .description('The topic plan (KAFKA_TOPIC_*, KAFKA_REPLICATION_FACTOR, ...) against KAFKA_BROKERS');
for (const [name, description] of [
  ['plan', 'Print the plan and how the cluster differs; changes nothing (exit 1 when it differs)'],
  [
    'apply',
    'Create missing topics and raise partition counts; never shrinks or deletes, says what it refuses',
  ],
] as const) {
  topics
    .command(name)
    .description(description)
    .action(async () => {
      process.exitCode = await (await import('./events/cli.ts')).runTopicsCli(name);
    });
}

const db = program.command('db').description('Ledger database: migrations and verification');
for (const [name, description] of [
  ['migrate', 'Apply pending migrations (DATABASE_URL, else the embedded PostgreSQL under .payrecon/pg)'],
  ['verify', 'Check every ledger invariant; exits non-zero naming each failure'],
  ['rollback', 'Revert the latest migration (never the baseline: it is every table)'],
  ['snapshot', 'Write the missing daily balance snapshots (the hourly verification job does it too)'],
] as const) {
  const command = db
    .command(name)
    .description(description)
    .option(
      '--url <url>',
      'postgres:// URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
    );
  if (name === 'verify') {
    command.option(
      '--since <instant|duration>',
      'verify only what changed since then (ISO 8601 instant with offset, or 90m, 24h, 7d back from now); ' +
        'the running balances against the latest snapshot plus the postings since',
    );
  }
  command.action(async (opts) =>
    (await import('./db/cli.ts')).runDbCli(
      name,
      databaseOpener(`payrecon db ${name}`, opts.url, '--url'),
      opts.since === undefined ? {} : { since: opts.since },
    ),
  );
}

const exception = program.command('exception').description('Work the exception queue from the command line');
const decide = exception
  .command('decide <id>')
  .description(
    "Decide an ILLEGAL_TRANSITION or FACTS_CHANGED: keep the ledger's (resolved at once) or propose accepting the provider's status or facts (booked once a controller approves)",
  )
  .option(
    '--accept-provider',
    "the provider's status (or new facts) is right: propose booking the ledger to match",
  )
  .option('--keep-ledger', "the ledger's status (or facts) is right: book nothing")
  .requiredOption('--note <text>', 'why (kept on the exception, its history and the entries booked)')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  );
userOptions(decide, 'who decides (an operator or a controller)').action(async (id, opts) =>
  (await import('./db/cli.ts')).runDecideCli(
    id,
    opts,
    async () => actAs(opts, 'work-exceptions', 'exception decide'),
    databaseOpener('payrecon exception decide', opts.databaseUrl),
  ),
);

for (const [action, description] of [
  [
    'approve',
    'Approve the decision proposed on an exception: the ledger books it now (a controller, never the proposer)',
  ],
  ['reject', 'Reject the decision proposed on an exception: nothing is booked (a controller)'],
] as const) {
  const command = exception
    .command(`${action} <id>`)
    .description(description)
    .option('--note <text>', action === 'reject' ? 'why (required)' : 'a note on the approval')
    .option(
      '--database-url <url>',
      'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
    );
  userOptions(command, 'the controller who answers').action(async (id, opts) =>
    (await import('./db/cli.ts')).runApprovalCli(
      action,
      id,
      opts,
      async () => actAs(opts, 'approve-booking', `exception ${action}`),
      databaseOpener(`payrecon exception ${action}`, opts.databaseUrl),
    ),
  );
}

exception
  .command('list')
  .description(
    'The exception queue, oldest first, one line each (id, type, severity, state, entity, amount, status, what the provider said or the rule)',
  )
  .option('--type <type>', 'only this type (e.g. ILLEGAL_TRANSITION)')
  .option('--state <state>', 'open, in_review, acknowledged or resolved (default: every state but resolved)')
  .option('--account <name>', 'only this merchant account')
  .option('--limit <n>', 'at most this many (default 100)')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  )
  .action(async (opts) =>
    (await import('./db/cli.ts')).runExceptionListCli(
      opts,
      databaseOpener('payrecon exception list', opts.databaseUrl),
    ),
  );

const web = program
  .command('web')
  .description('Serve the finance page (reports, exceptions, balances) and the JSON API /api/v1 on their own')
  .option('--host <host>', 'address to listen on (default PAYRECON_WEB_HOST)')
  .option('--port <port>', 'port to listen on (default PAYRECON_WEB_PORT)')
  .option('--database-url <url>', 'PostgreSQL URL (default DATABASE_URL)')
  .action(async (opts) => {
    await (await import('./commands.ts')).runWeb(opts, databaseOpener('payrecon web', opts.databaseUrl));
    // Everything has stopped in order; nothing may keep the process alive.
    process.exit(0);
  });
web
  .command('hash-password')
  .description('Read a password from stdin and print its scrypt hash for PAYRECON_WEB_USERS')
  .action(async () => (await import('./web/main.ts')).runHashPasswordCli());

const api = program.command('api').description('The JSON API under /api/v1');
const apiToken = api
  .command('token')
  .description('API bearer tokens, kept in the database (only their hash)');
apiToken
  .command('create')
  .description('Make a token: record its hash in the database and print the token once')
  .requiredOption('--name <name>', 'who uses it (shown as the actor of its changes)')
  .requiredOption(
    '--scopes <list>',
    'comma-separated: read, exceptions:write, exceptions:approve, reports:write, intents:write, imports:write',
  )
  .option('--expires <when>', 'YYYY-MM-DD, an ISO instant, or a number of days such as 90d (default: never)')
  .option('--by <name>', 'who makes it (default: $USER)')
  .option('--print-entry', 'write nothing: print the hashed entry to add to PAYRECON_API_TOKENS instead')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  )
  .action(async (opts) =>
    (await import('./api/cli.ts')).runApiTokenCreateCli(
      opts,
      opts.printEntry ? null : databaseOpener('payrecon api token create', opts.databaseUrl),
    ),
  );
apiToken
  .command('list')
  .description('The tokens in the database: id, name, scopes, state, created, expires, last used')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  )
  .action(async (opts) =>
    (await import('./api/cli.ts')).runApiTokenListCli(
      databaseOpener('payrecon api token list', opts.databaseUrl),
    ),
  );
apiToken
  .command('revoke <id>')
  .description('Revoke a token of the database by its id; the running instance refuses it within a second')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  )
  .action(async (id, opts) =>
    (await import('./api/cli.ts')).runApiTokenRevokeCli(
      id,
      databaseOpener('payrecon api token revoke', opts.databaseUrl),
    ),
  );

const report = program.command('report').description('Generate a workbook now, recorded as a report run');
for (const kind of ['settlement', 'exceptions'] as const) {
  report
    .command(kind)
    .description(
      kind === 'settlement'
        ? 'Settlement workbook for business days FROM..TO'
        : 'Exception workbook for FROM..TO',
    )
    .requiredOption('--from <date>', 'first business day, YYYY-MM-DD')
    .requiredOption('--to <date>', 'last business day (inclusive), YYYY-MM-DD')
    .option('--account <name>', 'one merchant account (default: all)')
    .requiredOption('--out <file.xlsx>', 'workbook to write')
    .option('--csv-dir <dir>', 'directory for the CSV of each detail sheet (default: next to --out)')
    .option('--no-csv', 'do not write CSV files')
    .option('--time-zone <zone>', 'IANA time zone (default PAYRECON_TIMEZONE)')
    .option('--cutoff <HH:MM>', 'settlement cut-off (default PAYRECON_SETTLEMENT_CUTOFF)')
    .option('--database-url <url>', 'PostgreSQL URL (default DATABASE_URL)')
    .option('--quiet', 'no progress bar')
    .option('--force', 'overwrite an existing workbook or CSV of the same name')
    .action(async (opts) =>
      (await import('./reports/main.ts')).runReportCli(kind, opts, async (settings) =>
        (await import('./commands.ts')).openReportServices(
          databaseOpener('payrecon report', opts.databaseUrl),
          settings,
        ),
      ),
    );
}

const close = program
  .command('close')
  .description('The month close of one merchant account and currency: prepare and sign, approve, show');
for (const [action, description] of [
  ['prepare', 'Compute the month, check its proof, and sign it (its figures are frozen with their SHA-256)'],
  ['approve', 'Approve a prepared close (never by the user who prepared it)'],
  ['show', 'Print the close (signed figures, or figures computed now) and whether its hash matches'],
] as const) {
  const command = close
    .command(action)
    .description(description)
    .requiredOption('--account <name>', 'merchant account')
    .requiredOption('--currency <code>', 'currency, e.g. BRL')
    .requiredOption(
      '--period <YYYY-MM>',
      'the month (in PAYRECON_TIMEZONE, cut-off PAYRECON_SETTLEMENT_CUTOFF)',
    )
    .option(
      '--database-url <url>',
      'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
    );
  if (action !== 'show') userOptions(command, 'the controller who prepares or approves');
  command.action(async (opts) => {
    const { loadConfig } = await import('./config.ts');
    const config = loadConfig();
    const { jobs } = config;
    await (await import('./reports/close.ts')).runCloseCli(
      action,
      {
        ...opts,
        actingUser: () => actAs(opts, 'sign-close', `close ${action}`),
        timeZone: jobs.timeZone,
        cutoff: jobs.settlementCutoff,
        bank: { accounts: config.bankAccounts, noteAbove: config.closeNoteAbove },
      },
      databaseOpener(`payrecon close ${action}`, opts.databaseUrl),
    );
  });
}

const intent = program.command('intent').description("Record the merchant's own creations (intents)");
intent
  .command('record')
  .description('Publish intents from a JSON file (one or an array); nothing is published if one is invalid')
  .requiredOption('--file <file>', 'JSON file with the intent(s)')
  .action(async (opts) => {
    requireFile('--file', opts.file);
    await (await import('./producers/intent/cli.ts')).runIntentRecordCli(opts, await publisherConnection());
  });

const backfill = program.command('backfill').description('Import intents, re-poll entities after the fact');
backfill
  .command('intents')
  .description('Import intents from a CSV file with a header row (columns in src/producers/backfill.ts)')
  .requiredOption('--csv <file>', 'CSV file of intents')
  .action(async (opts) => {
    requireFile('--csv', opts.csv);
    await (await import('./producers/backfill.ts')).runBackfillIntentsCli(opts, await publisherConnection());
  });
backfill
  .command('poll')
  .description('Read again the status of every entity first seen in a date range (source backfill)')
  .requiredOption('--from <date>', 'start, YYYY-MM-DD (UTC) or ISO 8601')
  .requiredOption('--to <date>', 'end, YYYY-MM-DD (that day included) or ISO 8601')
  .option('--account <name>', 'only this provider account')
  .action(async (opts) => {
    const backfill = await import('./producers/backfill.ts');
    // The period and a configured account are checked before anything connects.
    if (
      backfill.parseRangeDate(opts.to, '--to', true) <= backfill.parseRangeDate(opts.from, '--from', false)
    ) {
      throw new UsageError('--to', 'must be after --from');
    }
    const { accounts } = (await import('./config.ts')).loadConfig();
    if (opts.account !== undefined && accounts.length > 0 && !accounts.some((a) => a.name === opts.account)) {
      throw new UsageError(
        '--account',
        `no provider account ${opts.account} in PAYRECON_ACCOUNTS (known: ${accounts.map((a) => a.name).join(', ')})`,
      );
    }
    await backfill.runBackfillPollCli(opts, await publisherConnection());
  });

program
  .command('import <kind> <file>')
  .description(
    'Import a bank statement (camt.053, CSV, XLSX) or a provider transactions or settlement report: kind bank-statement, provider-transactions or provider-settlements; each line once',
  )
  .option(
    '--profile <file>',
    "mapping profile (JSON) of a CSV or XLSX file (default: the kind's built-in one)",
  )
  .option('--account <id>', 'the bank account of a CSV or XLSX statement without an account column')
  .option('--dry-run', 'read and check the file only; no database')
  .option('--json', 'print the result as JSON')
  .option(
    '--user <name>',
    'who imports: a user of PAYRECON_WEB_USERS or a sandbox user beside payrecon up, authenticated (default: cli:<system user>)',
  )
  .option(
    '--password-file <file>',
    "a file (mode 0600) holding --user's password (else PAYRECON_PASSWORD, else asked at a terminal)",
  )
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  )
  .action(async (kind, file, opts) => {
    requireFile('FILE', file);
    await (await import('./imports-cli.ts')).runImportCli(
      kind,
      file,
      opts,
      databaseOpener('payrecon import', opts.databaseUrl),
    );
  });

const matchCommand = program
  .command('match')
  .description(
    'Match the imported lines not matched yet with the configured rules (PAYRECON_MATCH_RULES) and raise or resolve the reconciliation exceptions',
  )
  .option('--json', 'print the result as JSON')
  .option('--line <identity...>', 'match by hand: the bank lines (or report rows) by identity')
  .option(
    '--with <identity...>',
    'match by hand: the settlements (or ledger payments kind:account:id) by identity',
  )
  .option('--pair <pair>', 'bank-settlement (default) or provider-ledger, with --line')
  .option('--undo <match>', 'end a match (unmatch) by its id')
  .option('--note <text>', 'why: required with --line or --undo')
  .option(
    '--database-url <url>',
    'PostgreSQL URL (default: DATABASE_URL, else the running payrecon up, else embedded)',
  );
userOptions(matchCommand, 'who matches or unmatches by hand (an operator or a controller)').action(
  async (opts) => {
    await (await import('./matching-cli.ts')).runMatchCli(
      { ...opts, actingUser: () => actAs(opts, 'work-exceptions', 'match by hand') },
      databaseOpener('payrecon match', opts.databaseUrl),
    );
  },
);

// <commands>

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version end here with their own exit code 0.
    if (err.exitCode === 0) process.exit(0);
    process.stderr.write(`payrecon: ${err.message.replace(/^error: /, '')}\n`);
    process.exit(2);
  }
  fail(err);
}
