-- Operators pause a group-buy (no new teams) and change its title, description and end.

-- AlterTable
ALTER TABLE "group_buy_activity" ADD COLUMN "paused" BOOLEAN NOT NULL DEFAULT false;
