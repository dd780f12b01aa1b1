-- Operators page every team of an activity, oldest first (teamsConnection); with a
-- status, team_activity_id_status_created_at_idx serves the page.

-- CreateIndex
CREATE INDEX "team_activity_id_created_at_id_idx" ON "team"("activity_id", "created_at", "id");
