-- A sender's retry of createRedPacket (after a timeout) creates and debits once: the
-- optional requestId is unique per sender. Packets without one are not affected.

-- AlterTable
ALTER TABLE "red_packet" ADD COLUMN "request_id" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "red_packet_sender_id_request_id_key" ON "red_packet"("sender_id", "request_id");
