-- The default voucher notifier dedupes its announcements by marking the redemption
-- DELIVERED itself, so it no longer keeps a row per announced voucher.

-- DropForeignKey
ALTER TABLE "voucher_notice" DROP CONSTRAINT "voucher_notice_redemption_id_fkey";

-- DropTable
DROP TABLE "voucher_notice";
