-- An operator's credit says why in their own words (creditWallet's reason); the ledger's
-- reason column keeps naming the kind of movement ('OPERATOR_CREDIT').
ALTER TABLE "wallet_ledger" ADD COLUMN "note" TEXT;

-- The operators' refund list without a status filter, newest first, a page at a time.
CREATE INDEX "refund_created_at_id_idx" ON "refund"("created_at", "id");
