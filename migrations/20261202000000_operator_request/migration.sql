-- An operator's retry of createGoods or createLotteryActivity (after a timeout) creates
-- once: the optional requestId is kept per operator and kind, with a digest of the terms.

-- CreateTable
CREATE TABLE "operator_request" (
    "kind" TEXT NOT NULL,
    "created_by" TEXT NOT NULL,
    "request_id" TEXT NOT NULL,
    "digest" TEXT NOT NULL,
    "object_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "operator_request_pkey" PRIMARY KEY ("kind","created_by","request_id")
);
