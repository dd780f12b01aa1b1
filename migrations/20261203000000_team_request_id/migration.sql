-- A leader's retry of openTeam (after a timeout) opens once: the optional requestId is
-- unique per leader, across activities, so one reused for another activity is refused
-- rather than opening a second team. Teams without one are not affected.

-- AlterTable
ALTER TABLE "team" ADD COLUMN "request_id" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "team_leader_id_request_id_key" ON "team"("leader_id", "request_id");
