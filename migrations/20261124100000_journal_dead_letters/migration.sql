-- A journal entry PostgreSQL refused for its own data (a NUL in a text field, say), kept
-- here instead of blocking its stream, for an operator to read. `fields` is the entry as
-- JSON text with control characters and lone surrogates escaped: text and jsonb both
-- refuse U+0000, and JSON.parse gives the fields back exactly. (stream, entry_id) makes
-- dead-lettering an entry twice (two sweepers) a no-op.
-- CreateTable
CREATE TABLE "journal_dead_letter" (
    "id" TEXT NOT NULL,
    "stream" TEXT NOT NULL,
    "entry_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "fields" TEXT NOT NULL,
    "error_code" TEXT NOT NULL,
    "error_message" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "journal_dead_letter_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "journal_dead_letter_stream_entry_id_key" ON "journal_dead_letter"("stream", "entry_id");

-- CreateIndex
CREATE INDEX "journal_dead_letter_created_at_idx" ON "journal_dead_letter"("created_at");
