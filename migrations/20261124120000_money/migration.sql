-- Money that moves: wallets in cents and the one outbox every refund owed goes through.
-- A wallet's balance is materialized from its ledger (balance = SUM(wallet_ledger.delta_cents))
-- and never negative; every ledger row carries a unique entry_key naming what moved the
-- money ('grab:<grant id>', 'credit:<request id>'…), so posting the same movement twice
-- is a no-op.

-- CreateEnum
CREATE TYPE "RefundStatus" AS ENUM ('PENDING', 'PAID');

-- CreateEnum
CREATE TYPE "RefundDestination" AS ENUM ('WALLET', 'PROVIDER');

-- CreateTable
CREATE TABLE "wallet_account" (
    "user_id" TEXT NOT NULL,
    "balance_cents" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "wallet_account_pkey" PRIMARY KEY ("user_id"),
    CONSTRAINT "wallet_account_balance_check" CHECK ("balance_cents" >= 0)
);

-- CreateTable
CREATE TABLE "wallet_ledger" (
    "id" BIGSERIAL NOT NULL,
    "entry_key" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "delta_cents" INTEGER NOT NULL,
    "reason" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "wallet_ledger_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "wallet_ledger_delta_check" CHECK ("delta_cents" <> 0)
);

-- CreateIndex
CREATE UNIQUE INDEX "wallet_ledger_entry_key_key" ON "wallet_ledger"("entry_key");

-- CreateIndex
CREATE INDEX "wallet_ledger_user_id_id_idx" ON "wallet_ledger"("user_id", "id");

-- CreateTable
CREATE TABLE "refund" (
    "id" TEXT NOT NULL,
    "source_key" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "amount_cents" INTEGER NOT NULL,
    "reason" TEXT NOT NULL,
    "payment_ref" TEXT,
    "status" "RefundStatus" NOT NULL DEFAULT 'PENDING',
    "paid_to" "RefundDestination",
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_until" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "paid_at" TIMESTAMPTZ(3),

    CONSTRAINT "refund_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "refund_amount_check" CHECK ("amount_cents" > 0)
);

-- CreateIndex
CREATE UNIQUE INDEX "refund_source_key_key" ON "refund"("source_key");

-- CreateIndex
CREATE INDEX "refund_user_id_created_at_idx" ON "refund"("user_id", "created_at");

-- CreateIndex
CREATE INDEX "refund_status_created_at_idx" ON "refund"("status", "created_at");

-- CreateIndex
CREATE INDEX "refund_due_idx" ON "refund"("next_attempt_at") WHERE status = 'PENDING';
