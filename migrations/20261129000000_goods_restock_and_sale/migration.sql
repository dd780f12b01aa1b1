-- Operators restock goods, change their title and price, and take them off sale.

-- AlterTable
ALTER TABLE "goods" ADD COLUMN "on_sale" BOOLEAN NOT NULL DEFAULT true;

-- A restock's stock reaches each bucket as a transfer from no bucket.
ALTER TABLE "goods_stock_transfer" ALTER COLUMN "from_bucket" DROP NOT NULL;

-- CreateTable
CREATE TABLE "goods_restock" (
    "id" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "request_id" TEXT NOT NULL,
    "units" INTEGER NOT NULL,
    "codes" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "goods_restock_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "goods_change" (
    "id" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "points_cost" INTEGER NOT NULL,
    "on_sale" BOOLEAN NOT NULL,
    "changed_by" TEXT NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "goods_change_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "goods_restock_goods_id_request_id_key" ON "goods_restock"("goods_id", "request_id");

-- CreateIndex
CREATE INDEX "goods_change_goods_id_changed_at_idx" ON "goods_change"("goods_id", "changed_at");

-- AddForeignKey
ALTER TABLE "goods_restock" ADD CONSTRAINT "goods_restock_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "goods_change" ADD CONSTRAINT "goods_change_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Every item's history starts with its terms at creation.
INSERT INTO "goods_change" ("id", "goods_id", "title", "points_cost", "on_sale", "changed_by", "changed_at")
SELECT 'created:' || "id", "id", "title", "points_cost", "on_sale", "created_by", "created_at" FROM "goods";

-- Not expressible in schema.prisma.
ALTER TABLE "goods_restock" ADD CONSTRAINT "goods_restock_check" CHECK ("units" > 0);
