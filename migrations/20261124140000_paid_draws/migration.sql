-- Draws paid in points (issue 14). A paid draw reserves its cost in the points shop
-- first (draw_payment RESERVED, taken from points_account), then draws; the draw's
-- commit turns the reservation into a ledger debit (PAID), and a draw that did not
-- happen releases it (RELEASED, given back). POINTS prizes are credited in the same commit.

ALTER TABLE "lottery_activity" ADD COLUMN "draw_cost_points" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "lottery_activity" ADD CONSTRAINT "lottery_activity_draw_cost_check" CHECK ("draw_cost_points" >= 0);

ALTER TABLE "lottery_draw" ADD COLUMN "cost_points" INTEGER NOT NULL DEFAULT 0;

CREATE TYPE "DrawPaymentStatus" AS ENUM ('RESERVED', 'PAID', 'RELEASED');

CREATE TABLE "draw_payment" (
    "draw_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "activity_id" TEXT NOT NULL,
    "request_id" TEXT,
    "cost" INTEGER NOT NULL,
    "status" "DrawPaymentStatus" NOT NULL,
    "prize_points" INTEGER NOT NULL DEFAULT 0,
    "reserved_at" TIMESTAMPTZ(3) NOT NULL,
    "release_after" TIMESTAMPTZ(3) NOT NULL,
    "settled_at" TIMESTAMPTZ(3),

    CONSTRAINT "draw_payment_pkey" PRIMARY KEY ("draw_id"),
    CONSTRAINT "draw_payment_amounts_check" CHECK ("cost" >= 0 AND "prize_points" >= 0)
);

-- One live reservation per (user, activity, requestId): a retry reuses it; a released one leaves room for a new try.
CREATE UNIQUE INDEX "draw_payment_request_key" ON "draw_payment"("user_id", "activity_id", "request_id") WHERE "status" <> 'RELEASED';
-- The sweeper's work: reservations past their deadline, and outcomes Redis has not heard of yet.
CREATE INDEX "draw_payment_reserved_idx" ON "draw_payment"("release_after") WHERE "status" = 'RESERVED';
CREATE INDEX "draw_payment_unsettled_idx" ON "draw_payment"("user_id") WHERE "settled_at" IS NULL;

ALTER TABLE "points_ledger" ADD COLUMN "draw_id" TEXT;
ALTER TABLE "points_ledger" DROP CONSTRAINT "points_ledger_source_check";
ALTER TABLE "points_ledger" ADD CONSTRAINT "points_ledger_source_check" CHECK (num_nonnulls("request_id", "redemption_id", "draw_id") = 1);
-- A draw's debit ('lottery draw') and its prize ('lottery prize'), each at most once.
CREATE UNIQUE INDEX "points_ledger_draw_reason_key" ON "points_ledger"("draw_id", "reason");
