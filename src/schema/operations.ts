import { builder } from '../builder.ts';
import { listLimit } from '../domain/points/input.ts';
import type { DeadLetter } from '../infra/journal/deadLetters.ts';

const JournalDeadLetter = builder.objectRef<DeadLetter>('JournalDeadLetter').implement({
  description: 'A journal entry PostgreSQL refused for its own data. Its change was undone in Redis and its caller got BAD_USER_INPUT.',
  fields: (t) => ({
    id: t.exposeID('id'),
    stream: t.exposeString('stream', { description: 'The Redis stream (campaign journal) it was taken from.' }),
    entryId: t.exposeString('entryId', { description: 'Its stream id; the first part is the Redis time in ms when its script ran.' }),
    kind: t.exposeString('kind'),
    fields: t.exposeString('fields', { description: 'The entry as a JSON object of strings; NULs and lone surrogates stay escaped as \\u0000 and \\ud800.' }),
    code: t.exposeString('code', { description: 'The SQLSTATE PostgreSQL refused it with, or "unknown".' }),
    error: t.exposeString('error', { description: "PostgreSQL's message." }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('journalDeadLetters', (t) =>
  t.withAuth({ admin: true }).field({
    type: [JournalDeadLetter],
    description: 'Operators: journal entries PostgreSQL refused, newest first.',
    args: { limit: t.arg.int({ defaultValue: 50, validate: listLimit, description: 'At most this many: 1 to 500.' }) },
    resolve: (_root, { limit }, { app }) => app.journal.deadLetters(limit ?? 50),
  }),
);
