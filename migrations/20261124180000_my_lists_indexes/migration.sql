-- A user's own lists (Me.teams, Me.draws) find their rows by user.

-- CreateIndex
CREATE INDEX "team_member_user_id_idx" ON "team_member"("user_id");

-- CreateIndex
CREATE INDEX "lottery_draw_user_id_drawn_at_idx" ON "lottery_draw"("user_id", "drawn_at");
