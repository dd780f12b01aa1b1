-- What paid draws hold reserved, on the account row: balance + held is the ledger's sum,
-- and every credit (an award, a POINTS prize) checks the ceiling, 2^31−1, against it with
-- the row locked. Summed from draw_payment instead, a reservation committed while the
-- credit waited for the lock was missed (the statement's snapshot predates it), and a
-- reservation given back onto a balance at the ceiling failed (22003) for good.

-- AlterTable
ALTER TABLE "points_account" ADD COLUMN "held" INTEGER NOT NULL DEFAULT 0;

UPDATE "points_account" a SET "held" = r."held"
FROM (SELECT "user_id", sum("cost")::int AS "held" FROM "draw_payment" WHERE "status" = 'RESERVED' GROUP BY "user_id") r
WHERE a."user_id" = r."user_id";

ALTER TABLE "points_account" ADD CONSTRAINT "points_account_held_check" CHECK ("held" >= 0);
