-- Group-buy activities defined by operators, and payments the server mints and only the
-- provider's signed notify settles. team.activity_id gets no foreign key: teams opened
-- before activities existed name activities that were never defined.

-- CreateTable
CREATE TABLE "group_buy_activity" (
    "id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT NOT NULL,
    "price_cents" INTEGER NOT NULL,
    "group_price_cents" INTEGER NOT NULL,
    "capacity" INTEGER NOT NULL,
    "lock_seconds" INTEGER NOT NULL,
    "formation_seconds" INTEGER NOT NULL,
    "starts_at" TIMESTAMPTZ(3) NOT NULL,
    "ends_at" TIMESTAMPTZ(3) NOT NULL,
    "max_teams_per_user" INTEGER NOT NULL,
    "max_open_teams_per_leader" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "group_buy_activity_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "group_buy_activity_price_check" CHECK ("group_price_cents" > 0 AND "group_price_cents" <= "price_cents"),
    CONSTRAINT "group_buy_activity_window_check" CHECK ("ends_at" > "starts_at")
);

-- CreateIndex
CREATE INDEX "group_buy_activity_created_at_id_idx" ON "group_buy_activity"("created_at", "id");

-- CreateEnum
CREATE TYPE "PaymentPurpose" AS ENUM ('TEAM_SEAT', 'WALLET_TOP_UP');

-- CreateEnum
CREATE TYPE "PaymentStatus" AS ENUM ('PENDING', 'SUCCEEDED', 'FAILED');

-- CreateTable
CREATE TABLE "payment" (
    "payment_ref" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "purpose" "PaymentPurpose" NOT NULL,
    "activity_id" TEXT,
    "team_id" TEXT,
    "amount_cents" INTEGER NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "status" "PaymentStatus" NOT NULL DEFAULT 'PENDING',
    "provider_txn_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "settled_at" TIMESTAMPTZ(3),

    CONSTRAINT "payment_pkey" PRIMARY KEY ("payment_ref"),
    CONSTRAINT "payment_amount_check" CHECK ("amount_cents" > 0)
);

-- CreateIndex
CREATE INDEX "payment_user_id_created_at_idx" ON "payment"("user_id", "created_at");

-- CreateIndex
CREATE INDEX "payment_team_id_idx" ON "payment"("team_id");
