-- CreateEnum
CREATE TYPE "SplitMode" AS ENUM ('RANDOM', 'NORMAL', 'EQUAL');

-- CreateTable
CREATE TABLE "red_packet" (
    "id" TEXT NOT NULL,
    "sender_id" TEXT NOT NULL,
    "total_amount" INTEGER NOT NULL,
    "count" INTEGER NOT NULL,
    "mode" "SplitMode" NOT NULL,
    "min_amount" INTEGER NOT NULL,
    "max_amount" INTEGER NOT NULL,
    "greeting" TEXT,
    "share_amounts" INTEGER[],
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "refunded_at" TIMESTAMPTZ(3),
    "refunded_amount" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "red_packet_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "red_packet_grab" (
    "id" TEXT NOT NULL,
    "packet_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "share_index" INTEGER NOT NULL,
    "amount" INTEGER NOT NULL,
    "grabbed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "red_packet_grab_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "red_packet_expires_at_idx" ON "red_packet"("expires_at");

-- CreateIndex
CREATE INDEX "red_packet_grab_packet_id_grabbed_at_idx" ON "red_packet_grab"("packet_id", "grabbed_at");

-- CreateIndex
CREATE UNIQUE INDEX "red_packet_grab_packet_user_key" ON "red_packet_grab"("packet_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "red_packet_grab_packet_share_key" ON "red_packet_grab"("packet_id", "share_index");

-- AddForeignKey
ALTER TABLE "red_packet_grab" ADD CONSTRAINT "red_packet_grab_packet_id_fkey" FOREIGN KEY ("packet_id") REFERENCES "red_packet"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
