-- CreateEnum
CREATE TYPE "TeamStatus" AS ENUM ('OPEN', 'COMPLETE', 'FAILED');

-- CreateEnum
CREATE TYPE "TeamSeatEventKind" AS ENUM ('LOCKED', 'RELEASED', 'MOVED', 'EXPIRED', 'CONFIRMED');

-- CreateTable
CREATE TABLE "team" (
    "id" TEXT NOT NULL,
    "activity_id" TEXT NOT NULL,
    "leader_id" TEXT NOT NULL,
    "capacity" INTEGER NOT NULL,
    "lock_seconds" INTEGER NOT NULL,
    "deadline" TIMESTAMPTZ(3) NOT NULL,
    "status" "TeamStatus" NOT NULL DEFAULT 'OPEN',
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "closed_at" TIMESTAMPTZ(3),

    CONSTRAINT "team_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "team_member" (
    "team_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "payment_ref" TEXT,
    "seat" INTEGER NOT NULL,
    "joined_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "team_member_pkey" PRIMARY KEY ("team_id","user_id")
);

-- CreateTable
CREATE TABLE "team_refund" (
    "team_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "payment_ref" TEXT,
    "recorded_at" TIMESTAMPTZ(3) NOT NULL,
    "refunded_at" TIMESTAMPTZ(3),

    CONSTRAINT "team_refund_pkey" PRIMARY KEY ("team_id","user_id")
);

-- CreateTable
CREATE TABLE "team_seat_event" (
    "id" TEXT NOT NULL,
    "team_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "kind" "TeamSeatEventKind" NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL,
    "expires_at" TIMESTAMPTZ(3),

    CONSTRAINT "team_seat_event_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "team_activity_id_status_created_at_idx" ON "team"("activity_id", "status", "created_at");

-- CreateIndex
CREATE INDEX "team_status_deadline_idx" ON "team"("status", "deadline");

-- CreateIndex
CREATE UNIQUE INDEX "team_member_team_payment_key" ON "team_member"("team_id", "payment_ref");

-- CreateIndex
CREATE UNIQUE INDEX "team_member_team_seat_key" ON "team_member"("team_id", "seat");

-- CreateIndex
CREATE INDEX "team_seat_event_team_id_at_idx" ON "team_seat_event"("team_id", "at");

-- CreateIndex
CREATE INDEX "team_seat_event_user_id_at_idx" ON "team_seat_event"("user_id", "at");

-- AddForeignKey
ALTER TABLE "team_member" ADD CONSTRAINT "team_member_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "team"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "team_refund" ADD CONSTRAINT "team_refund_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "team"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "team_seat_event" ADD CONSTRAINT "team_seat_event_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "team"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
