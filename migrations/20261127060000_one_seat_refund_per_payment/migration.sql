-- A seat payment is owed back at most once for its seat: as too late (LATE_PAYMENT) or
-- with its failed team (TEAM_FAILED), never both. Each is decided in its own statement,
-- so the database keeps the two from racing; a second charge (DUPLICATE_PAYMENT) is apart.
CREATE UNIQUE INDEX "refund_seat_payment_key" ON "refund"("payment_ref") WHERE reason IN ('LATE_PAYMENT', 'TEAM_FAILED');
