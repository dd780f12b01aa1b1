-- Redemption indexes that a row needs no entry in stay out of it: stock units only for
-- goods without a pool, sequence numbers only for goods with a per-user limit, and
-- due deliveries only while PENDING. Marking a redemption DELIVERED rewrites every
-- index entry of the row (the update is not HOT), so fewer entries make the delivery
-- cheaper as well as the insert.
-- DropIndex
DROP INDEX "redemption_goods_unit_key";

-- DropIndex
DROP INDEX "redemption_goods_user_seq_key";

-- DropIndex
DROP INDEX "redemption_status_next_attempt_at_idx";

-- CreateIndex
CREATE UNIQUE INDEX "redemption_goods_unit_key" ON "redemption"("goods_id", "stock_unit") WHERE (stock_unit IS NOT NULL);

-- CreateIndex
CREATE UNIQUE INDEX "redemption_goods_user_seq_key" ON "redemption"("goods_id", "user_id", "user_seq") WHERE (user_seq IS NOT NULL);

-- CreateIndex
CREATE INDEX "redemption_due_idx" ON "redemption"("next_attempt_at") WHERE (status = 'PENDING');
