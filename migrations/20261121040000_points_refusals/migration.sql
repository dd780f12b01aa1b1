-- A refused redemption, so that a retried requestId gets the same problem even after
-- Redis lost its memory of the first answer.
-- CreateTable
CREATE TABLE "redemption_refusal" (
    "user_id" TEXT NOT NULL,
    "request_id" TEXT NOT NULL,
    "goods_id" TEXT NOT NULL,
    "answer" TEXT NOT NULL,
    "refused_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "redemption_refusal_pkey" PRIMARY KEY ("user_id","request_id")
);

-- AddForeignKey
ALTER TABLE "redemption_refusal" ADD CONSTRAINT "redemption_refusal_goods_id_fkey" FOREIGN KEY ("goods_id") REFERENCES "goods"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
