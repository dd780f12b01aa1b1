-- An operator's retry of updateLotteryActivity (after SERVICE_UNAVAILABLE) applies the
-- change once: the optional requestId is unique per activity and operator, with a digest
-- of the change, so a delta such as addStock is never added twice. Versions without one
-- (every version 1, and changes sent without a requestId) are not affected.

-- AlterTable
ALTER TABLE "lottery_settings" ADD COLUMN     "request_digest" TEXT,
ADD COLUMN     "request_id" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "lottery_settings_request_key" ON "lottery_settings"("activity_id", "changed_by", "request_id");

-- A requestId comes with the digest of its change.
ALTER TABLE "lottery_settings" ADD CONSTRAINT "lottery_settings_request_digest_check" CHECK (("request_id" IS NULL) = ("request_digest" IS NULL));
