-- A goods item's sale may open and close at set instants (a 10:00 flash sale), besides the operator's switch.

-- AlterTable
ALTER TABLE "goods" ADD COLUMN "sale_starts_at" TIMESTAMPTZ(3),
ADD COLUMN "sale_ends_at" TIMESTAMPTZ(3);

-- AlterTable
ALTER TABLE "goods_change" ADD COLUMN "sale_starts_at" TIMESTAMPTZ(3),
ADD COLUMN "sale_ends_at" TIMESTAMPTZ(3);
