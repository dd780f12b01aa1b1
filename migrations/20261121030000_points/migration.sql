-- CreateEnum
CREATE TYPE "RedemptionStatus" AS ENUM ('PENDING', 'DELIVERED');

-- CreateTable
CREATE TABLE "points_account" (
    "user_id" TEXT NOT NULL,
    "balance" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "points_account_pkey" PRIMARY KEY ("user_id")
);

-- CreateTable
CREATE TABLE "points_ledger" (
    "id" BIGSERIAL NOT NULL,
    "user_id" TEXT NOT NULL,
    "delta" INTEGER NOT NULL,
    "reason" TEXT NOT NULL,
    "request_id" TEXT,
    "redemption_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "points_ledger_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "goods" (
    "id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "points_cost" INTEGER NOT NULL,
    "stock" INTEGER NOT NULL,
    "per_user_limit" INTEGER NOT NULL,
    "pooled" BOOLEAN NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "goods_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "voucher_code" (
    "code" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "position" INTEGER NOT NULL,

    CONSTRAINT "voucher_code_pkey" PRIMARY KEY ("code")
);

-- CreateTable
CREATE TABLE "redemption" (
    "id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "request_id" TEXT NOT NULL,
    "points_spent" INTEGER NOT NULL,
    "voucher_code" TEXT,
    "stock_unit" INTEGER,
    "user_seq" INTEGER,
    "status" "RedemptionStatus" NOT NULL DEFAULT 'PENDING',
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "delivery_attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL,
    "locked_until" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "delivered_at" TIMESTAMPTZ(3),

    CONSTRAINT "redemption_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "voucher_notice" (
    "redemption_id" TEXT NOT NULL,
    "sent_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voucher_notice_pkey" PRIMARY KEY ("redemption_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "points_ledger_request_id_key" ON "points_ledger"("request_id");

-- CreateIndex
CREATE UNIQUE INDEX "points_ledger_redemption_id_key" ON "points_ledger"("redemption_id");

-- CreateIndex
CREATE INDEX "points_ledger_user_id_idx" ON "points_ledger"("user_id");

-- CreateIndex
CREATE UNIQUE INDEX "voucher_code_goods_position_key" ON "voucher_code"("goods_id", "position");

-- CreateIndex
CREATE UNIQUE INDEX "redemption_voucher_code_key" ON "redemption"("voucher_code");

-- CreateIndex
CREATE INDEX "redemption_goods_id_created_at_idx" ON "redemption"("goods_id", "created_at");

-- CreateIndex
CREATE INDEX "redemption_user_id_created_at_idx" ON "redemption"("user_id", "created_at");

-- CreateIndex
CREATE INDEX "redemption_status_next_attempt_at_idx" ON "redemption"("status", "next_attempt_at");

-- CreateIndex
CREATE UNIQUE INDEX "redemption_user_request_key" ON "redemption"("user_id", "request_id");

-- CreateIndex
CREATE UNIQUE INDEX "redemption_goods_unit_key" ON "redemption"("goods_id", "stock_unit");

-- CreateIndex
CREATE UNIQUE INDEX "redemption_goods_user_seq_key" ON "redemption"("goods_id", "user_id", "user_seq");

-- AddForeignKey
ALTER TABLE "points_ledger" ADD CONSTRAINT "points_ledger_redemption_id_fkey" FOREIGN KEY ("redemption_id") REFERENCES "redemption"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "voucher_code" ADD CONSTRAINT "voucher_code_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "redemption" ADD CONSTRAINT "redemption_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "redemption" ADD CONSTRAINT "redemption_voucher_code_fkey" FOREIGN KEY ("voucher_code") REFERENCES "voucher_code"("code") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "voucher_notice" ADD CONSTRAINT "voucher_notice_redemption_id_fkey" FOREIGN KEY ("redemption_id") REFERENCES "redemption"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Not expressible in schema.prisma: the guards PostgreSQL keeps whatever Redis says.
ALTER TABLE "points_account" ADD CONSTRAINT "points_account_balance_check" CHECK ("balance" >= 0);
ALTER TABLE "points_ledger" ADD CONSTRAINT "points_ledger_source_check" CHECK (("request_id" IS NULL) <> ("redemption_id" IS NULL));
ALTER TABLE "goods" ADD CONSTRAINT "goods_check" CHECK ("points_cost" > 0 AND "stock" > 0 AND "per_user_limit" >= 0);
ALTER TABLE "redemption" ADD CONSTRAINT "redemption_check" CHECK ("stock_unit" >= 0 AND "user_seq" >= 1);
