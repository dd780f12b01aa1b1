-- Operators page an activity's wins, all or one prize's, oldest first (lotteryWins), to
-- ship the prizes. Losses, often most of the draws, have no entry: the indexes cost a win
-- one entry each, and a page reads only wins, in order, however many draws lost.

-- CreateIndex
CREATE INDEX "lottery_draw_activity_win_idx" ON "lottery_draw"("activity_id", "drawn_at", "id") WHERE (prize_id IS NOT NULL);

-- CreateIndex
CREATE INDEX "lottery_draw_prize_win_idx" ON "lottery_draw"("prize_id", "drawn_at", "id") WHERE (prize_id IS NOT NULL);
