-- Before refund_seat_payment_key (the next migration) can be built: a seat payment owed
-- back twice, as LATE_PAYMENT and as TEAM_FAILED (possible before that index), keeps one
-- refund, a paid one if any. A second one not yet paid is dropped: it was never owed. One
-- already paid stays, as DOUBLE_SEAT_REFUND, the record of money paid out twice.
WITH ranked AS (
  SELECT id, status,
         row_number() OVER (PARTITION BY payment_ref ORDER BY status = 'PAID' DESC, created_at, id) AS rank
  FROM "refund"
  WHERE reason IN ('LATE_PAYMENT', 'TEAM_FAILED') AND payment_ref IS NOT NULL
),
dropped AS (
  DELETE FROM "refund" WHERE id IN (SELECT id FROM ranked WHERE rank > 1 AND status = 'PENDING')
)
UPDATE "refund" SET reason = 'DOUBLE_SEAT_REFUND' WHERE id IN (SELECT id FROM ranked WHERE rank > 1 AND status = 'PAID');
