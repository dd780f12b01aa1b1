-- Stock bucketing (POINTS_SHOP_BUCKETS): a goods item's stock is spread over the shop's
-- buckets; each bucket's share is durable here, so a rebuild of one bucket knows it.

-- CreateTable
CREATE TABLE "goods_bucket_stock" (
    "goods_id" TEXT NOT NULL,
    "bucket" INTEGER NOT NULL,
    "allotted" INTEGER NOT NULL,

    CONSTRAINT "goods_bucket_stock_pkey" PRIMARY KEY ("goods_id", "bucket")
);

-- CreateTable
CREATE TABLE "goods_stock_transfer" (
    "id" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "from_bucket" INTEGER NOT NULL,
    "to_bucket" INTEGER NOT NULL,
    "units" INTEGER NOT NULL,
    "codes" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "taken_at" TIMESTAMPTZ(3) NOT NULL,
    "given_at" TIMESTAMPTZ(3),
    "given_by" TEXT,

    CONSTRAINT "goods_stock_transfer_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "goods_stock_transfer_in_flight_idx" ON "goods_stock_transfer"("goods_id") WHERE "given_at" IS NULL;

-- AddForeignKey
ALTER TABLE "goods_bucket_stock" ADD CONSTRAINT "goods_bucket_stock_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "goods_stock_transfer" ADD CONSTRAINT "goods_stock_transfer_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- A redemption's stock unit counts within its bucket; a voucher code belongs to one bucket, none while in flight.
ALTER TABLE "redemption" ADD COLUMN "stock_bucket" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "voucher_code" ADD COLUMN "bucket" INTEGER DEFAULT 0;
DROP INDEX "redemption_goods_unit_key";
CREATE UNIQUE INDEX "redemption_goods_bucket_unit_key" ON "redemption"("goods_id", "stock_bucket", "stock_unit") WHERE (stock_unit IS NOT NULL);

-- Every goods item so far lives in bucket 0 with all its stock.
INSERT INTO "goods_bucket_stock" ("goods_id", "bucket", "allotted") SELECT "id", 0, "stock" FROM "goods";

-- Not expressible in schema.prisma.
ALTER TABLE "goods_bucket_stock" ADD CONSTRAINT "goods_bucket_stock_check" CHECK ("bucket" >= 0 AND "allotted" >= 0);
ALTER TABLE "goods_stock_transfer" ADD CONSTRAINT "goods_stock_transfer_check" CHECK ("units" > 0 AND "from_bucket" <> "to_bucket");
