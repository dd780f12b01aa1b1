-- CreateEnum
CREATE TYPE "LotteryStrategy" AS ENUM ('WEIGHTED', 'TIMED');

-- CreateEnum
CREATE TYPE "PrizeKind" AS ENUM ('GOODS', 'POINTS', 'CONSOLATION');

-- CreateTable
CREATE TABLE "lottery_activity" (
    "id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "strategy" "LotteryStrategy" NOT NULL,
    "starts_at" TIMESTAMPTZ(3) NOT NULL,
    "ends_at" TIMESTAMPTZ(3) NOT NULL,
    "paused" BOOLEAN NOT NULL DEFAULT false,
    "no_prize_weight" INTEGER NOT NULL,
    "daily_draw_limit" INTEGER NOT NULL,
    "daily_win_limit" INTEGER NOT NULL,
    "timezone" TEXT NOT NULL,
    "settings_version" INTEGER NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "lottery_activity_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "lottery_prize" (
    "id" TEXT NOT NULL,
    "activity_id" TEXT NOT NULL,
    "position" INTEGER NOT NULL,
    "title" TEXT NOT NULL,
    "kind" "PrizeKind" NOT NULL,
    "points" INTEGER,
    "weight" INTEGER NOT NULL,
    "total_stock" INTEGER NOT NULL,
    "daily_stock" INTEGER,
    "hourly_quota" INTEGER[],

    CONSTRAINT "lottery_prize_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "lottery_settings" (
    "activity_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "settings" JSONB NOT NULL,
    "changed_by" TEXT NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "lottery_settings_pkey" PRIMARY KEY ("activity_id","version")
);

-- CreateTable
CREATE TABLE "lottery_draw" (
    "id" TEXT NOT NULL,
    "activity_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "request_id" TEXT,
    "local_day" DATE NOT NULL,
    "draw_seq" INTEGER NOT NULL,
    "prize_id" TEXT,
    "stock_unit" INTEGER,
    "daily_unit" INTEGER,
    "win_seq" INTEGER,
    "release_at" TIMESTAMPTZ(3),
    "random_input" BIGINT,
    "weight_total" INTEGER,
    "roll" INTEGER,
    "pool" INTEGER[],
    "settings_version" INTEGER NOT NULL,
    "prize_snapshot" JSONB,
    "drawn_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "lottery_draw_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "lottery_release" (
    "prize_id" TEXT NOT NULL,
    "stock_unit" INTEGER NOT NULL,
    "activity_id" TEXT NOT NULL,
    "hour_start" TIMESTAMPTZ(3) NOT NULL,
    "release_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "lottery_release_pkey" PRIMARY KEY ("prize_id","stock_unit")
);

-- CreateTable
CREATE TABLE "lottery_scheduled_hour" (
    "activity_id" TEXT NOT NULL,
    "hour_start" TIMESTAMPTZ(3) NOT NULL,
    "schedule_id" TEXT NOT NULL,
    "local_hour" INTEGER NOT NULL,
    "released" INTEGER NOT NULL,
    "scheduled_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "lottery_scheduled_hour_pkey" PRIMARY KEY ("activity_id","hour_start")
);

-- CreateIndex
CREATE INDEX "lottery_activity_strategy_ends_at_idx" ON "lottery_activity"("strategy", "ends_at");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_prize_activity_position_key" ON "lottery_prize"("activity_id", "position");

-- CreateIndex
CREATE INDEX "lottery_draw_activity_id_drawn_at_idx" ON "lottery_draw"("activity_id", "drawn_at");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_draw_user_day_seq_key" ON "lottery_draw"("activity_id", "user_id", "local_day", "draw_seq");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_draw_user_day_win_key" ON "lottery_draw"("activity_id", "user_id", "local_day", "win_seq");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_draw_request_key" ON "lottery_draw"("activity_id", "user_id", "request_id");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_draw_prize_unit_key" ON "lottery_draw"("prize_id", "stock_unit");

-- CreateIndex
CREATE UNIQUE INDEX "lottery_draw_prize_day_unit_key" ON "lottery_draw"("prize_id", "local_day", "daily_unit");

-- CreateIndex
CREATE INDEX "lottery_release_activity_id_release_at_idx" ON "lottery_release"("activity_id", "release_at");

-- AddForeignKey
ALTER TABLE "lottery_prize" ADD CONSTRAINT "lottery_prize_activity_id_fkey" FOREIGN KEY ("activity_id") REFERENCES "lottery_activity"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "lottery_settings" ADD CONSTRAINT "lottery_settings_activity_id_fkey" FOREIGN KEY ("activity_id") REFERENCES "lottery_activity"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
