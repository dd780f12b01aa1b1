import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { VERSION } from '../version.ts';
import { AuthFailure } from './auth/tokens.ts';
import type { PoolCounts } from './db/database.ts';
import { BACKLOG_COUNT_MAX, type OutboxBacklog } from './outbox/outbox.ts';

/**
 * The process's Prometheus metrics, served at GET /metrics (src/metrics.ts). One
 * registry per process: a metric belongs to the process (a cluster worker is scraped on
 * its own), and a module-level one is reachable from the infrastructure without plumbing.
 * Recording is a synchronous increment or observation: nothing here touches Redis on a
 * request; what needs a store (journal depth and lag, outbox backlogs) is read when Prometheus scrapes.
 */
export const registry = new Registry();

/**
 * The event loop's delay is sampled by a timer this often, and each sample includes the
 * interval: at prom-client's default of 10 ms an idle loop read as 10 ms late. Each sample
 * wakes the process; at 5 ms that costs about half a percent of a core more than at 10 ms.
 */
const EVENT_LOOP_RESOLUTION_MS = 5;
collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_RESOLUTION_MS });
// prom-client takes no help text for its own metrics: the sampling is said after theirs.
for (const statistic of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']) {
  const metric = registry.getSingleMetric(`nodejs_eventloop_lag_${statistic}_seconds`) as unknown as { help: string };
  metric.help += ` Sampled every ${EVENT_LOOP_RESOLUTION_MS} ms; a sample counts that interval too, so an idle loop reads about ${EVENT_LOOP_RESOLUTION_MS / 1000}.`;
}

// Which release each instance runs, as the Upgrading steps need to know.
new Gauge({
  name: 'build_info',
  help: 'Always 1; its version label is the release this process runs',
  labelNames: ['version'] as const,
  registers: [registry],
}).set({ version: VERSION }, 1);

/**
 * Gives each known value of a counter's label its series at 0 from the start: a series
 * that appears only at its first increment is missed by rate() and increase(), so the
 * first outage or refusal would not show.
 */
function startAtZero<Label extends string>(counter: Counter<Label>, label: Label, values: readonly (string | number)[]): Counter<Label> {
  for (const value of values) counter.inc({ [label]: value } as Partial<Record<Label, string | number>>, 0);
  return counter;
}

export const graphqlRequests = new Counter({
  name: 'graphql_requests_total',
  help: 'GraphQL operations executed, by operation name and type',
  labelNames: ['operation', 'type'] as const,
  registers: [registry],
});

export const graphqlDuration = new Histogram({
  name: 'graphql_request_duration_seconds',
  help: 'Execution time of GraphQL operations (subscriptions: until their source is set up), by operation name and type',
  labelNames: ['operation', 'type'] as const,
  // Up to the service's own waits: a Redis command (5 s), a lock or a pooled connection (10 s), a statement (30 s).
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});

export const businessRefusals = new Counter({
  name: 'business_refusals_total',
  help: 'Problems mutations and queries answered with (union members such as TEAM_FULL, OUT_OF_STOCK), by code',
  labelNames: ['code'] as const,
  registers: [registry],
});

/** The limits a request is refused RATE_LIMITED by, as rate_limited_requests_total labels them. */
const RATE_LIMITS = ['mutation', 'anonymous', 'cost', 'ws-open', 'ws-connection'] as const;
export type RateLimit = (typeof RATE_LIMITS)[number];

export const rateLimited = startAtZero(
  new Counter({
    name: 'rate_limited_requests_total',
    help: 'Requests refused with RATE_LIMITED, by limit (mutation, anonymous, cost, ws-open, ws-connection)',
    labelNames: ['limit'] as const,
    registers: [registry],
  }),
  'limit',
  RATE_LIMITS,
);

export const paymentNotifies = startAtZero(
  new Counter({
    name: 'payment_notifies_total',
    help: 'Calls to POST /payments/notify, by the HTTP status answered (401: a bad signature, 503: not settled now)',
    labelNames: ['status'] as const,
    registers: [registry],
  }),
  'status',
  [200, 400, 401, 404, 405, 409, 413, 503],
);

export const storeErrors = startAtZero(
  new Counter({
    name: 'store_errors_total',
    help: 'Outages of Redis or PostgreSQL: operations answered SERVICE_UNAVAILABLE (source=request), connection errors of ioredis (source=redis) and of the pg pool (source=postgres)',
    labelNames: ['source'] as const,
    registers: [registry],
  }),
  'source',
  ['request', 'redis', 'postgres'],
);

export const authRefusals = startAtZero(
  new Counter({
    name: 'auth_refusals_total',
    help: "Requests whose Authorization was refused, by UNAUTHENTICATED's reason: a JWT_SECRET or key mismatch shows as BAD_SIGNATURE",
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  'reason',
  // A missing token is no refusal of one: fields that need a sign-in answer it, uncounted.
  Object.values(AuthFailure).filter((reason) => reason !== AuthFailure.missing),
);

export const journalBatchSize = new Histogram({
  name: 'journal_batch_size',
  help: 'Entries per group commit of the journal',
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
  registers: [registry],
});

export const journalCommitDuration = new Histogram({
  name: 'journal_commit_duration_seconds',
  help: 'Time a group commit of the journal takes in PostgreSQL',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

export const journalDeadLetters = new Counter({
  name: 'journal_dead_letters_total',
  help: 'Journal entries PostgreSQL refused on their own, dead-lettered by this process',
  registers: [registry],
});

export const campaignRebuilds = new Counter({
  name: 'campaign_rebuilds_total',
  help: "Rebuilds of a campaign's Redis keys from PostgreSQL run by this process",
  registers: [registry],
});

export const liveSubscribers = new Gauge({
  name: 'live_event_subscribers',
  help: 'Listeners of live events (one per running GraphQL subscription)',
  registers: [registry],
});

export const wsConnections = new Gauge({
  name: 'graphql_ws_connections',
  help: 'Open graphql-ws connections',
  registers: [registry],
});

/** What journal depth and lag are read from at scrape time. */
export interface JournalProbe {
  /** Entries in the journal's streams, and the age in ms of the oldest one (0 when empty). */
  backlog(): Promise<{ depth: number; lagMs: number }>;
}

/** How long a scrape waits for a store's answer before serving the gauges that show it as they were. */
const STORE_WAIT_MS = 1000;

/**
 * Reads a store for a scrape: once for all the gauges that show it, one read at a time.
 * Without an answer (the store down, or hung past STORE_WAIT_MS) it gives undefined and the
 * gauges keep their last value: the other metrics (the outage counted among them) must
 * still be served, and a hung store holds a read for its whole timeout, longer than a scrape may take.
 */
function readOnScrape<T>(probe: () => Promise<T>): () => Promise<T | undefined> {
  let reading: Promise<T | undefined> | undefined;
  let scraping: Promise<T | undefined> | undefined;
  return () =>
    (scraping ??= (async (): Promise<T | undefined> => {
      reading ??= probe()
        .catch(() => undefined)
        .finally(() => (reading = undefined));
      let timer: NodeJS.Timeout | undefined;
      const givenUp = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, STORE_WAIT_MS, undefined)));
      try {
        return await Promise.race([reading, givenUp]);
      } finally {
        clearTimeout(timer);
      }
    })().finally(() => setImmediate(() => (scraping = undefined))));
}

/** Registers the journal gauges, read from Redis on each scrape only. */
export function watchJournal(probe: JournalProbe): void {
  const read = readOnScrape(() => probe.backlog());
  registry.removeSingleMetric('journal_depth');
  registry.removeSingleMetric('journal_lag_seconds');
  new Gauge({
    name: 'journal_depth',
    help: 'Entries waiting in the journal streams to be committed to PostgreSQL',
    registers: [registry],
    async collect() {
      const backlog = await read();
      if (backlog) this.set(backlog.depth);
    },
  });
  new Gauge({
    name: 'journal_lag_seconds',
    help: 'Age of the oldest entry waiting in the journal streams',
    registers: [registry],
    async collect() {
      const backlog = await read();
      if (backlog) this.set(backlog.lagMs / 1000);
    },
  });
}

/** Registers the outbox gauges, one series per outbox (its table), read from the database on each scrape only. */
export function watchOutboxes(outboxes: Record<string, () => Promise<OutboxBacklog>>): void {
  const reads = Object.entries(outboxes).map(([outbox, backlog]) => ({ outbox, read: readOnScrape(backlog) }));
  const show = async (gauge: Gauge<'outbox'>, value: (backlog: OutboxBacklog) => number) => {
    await Promise.all(
      reads.map(async ({ outbox, read }) => {
        const backlog = await read();
        if (backlog) gauge.set({ outbox }, value(backlog));
      }),
    );
  };
  registry.removeSingleMetric('outbox_pending');
  registry.removeSingleMetric('outbox_oldest_pending_seconds');
  new Gauge({
    name: 'outbox_pending',
    help: `Rows waiting for delivery in each outbox (redemption: vouchers, refund: refunds), counted up to ${BACKLOG_COUNT_MAX}: that value means at least as many`,
    labelNames: ['outbox'] as const,
    registers: [registry],
    collect() {
      return show(this, (backlog) => backlog.pending);
    },
  });
  new Gauge({
    name: 'outbox_oldest_pending_seconds',
    help: `Age of the oldest row waiting in each outbox (0 when none waits); past ${BACKLOG_COUNT_MAX} waiting, the oldest of the ${BACKLOG_COUNT_MAX} most due`,
    labelNames: ['outbox'] as const,
    registers: [registry],
    collect() {
      return show(this, (backlog) => backlog.oldestAgeMs / 1000);
    },
  });
}

/** Registers the gauges of the PostgreSQL pool, or none on PGlite, which has no pool. */
export function watchPool(pool: PoolCounts | undefined): void {
  const gauges = [
    { name: 'postgres_pool_connections', help: 'Connections the PostgreSQL pool holds, busy or idle (at most DATABASE_POOL_SIZE)', count: 'totalCount' },
    { name: 'postgres_pool_idle_connections', help: 'Connections of the PostgreSQL pool that wait for work', count: 'idleCount' },
    { name: 'postgres_pool_waiting_requests', help: 'Queries and transactions waiting for a connection of the PostgreSQL pool, all of them busy', count: 'waitingCount' },
  ] as const;
  for (const { name, help, count } of gauges) {
    registry.removeSingleMetric(name);
    if (!pool) continue;
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(pool[count]);
      },
    });
  }
}
