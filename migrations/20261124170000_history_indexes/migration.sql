-- A user's own lists (Me.redPacketsSent, Me.sharesGrabbed) read newest first by user.

-- CreateIndex
CREATE INDEX "red_packet_sender_id_created_at_idx" ON "red_packet"("sender_id", "created_at");

-- CreateIndex
CREATE INDEX "red_packet_grab_user_id_grabbed_at_idx" ON "red_packet_grab"("user_id", "grabbed_at");
