-- Red packets funded from wallets: who paid for a packet. WALLET packets debited the
-- sender's wallet (ledger entry 'packet:<id>') when they were created, and their remainder
-- is refunded to the sender through the refund outbox; SHOP packets (operators only) debit
-- no one and their remainder stays with the shop. Packets created before wallets existed
-- debited no one, so they count as the shop's.

-- CreateEnum
CREATE TYPE "RedPacketFunding" AS ENUM ('WALLET', 'SHOP');

-- AlterTable
ALTER TABLE "red_packet" ADD COLUMN "funded_by" "RedPacketFunding" NOT NULL DEFAULT 'SHOP';
ALTER TABLE "red_packet" ALTER COLUMN "funded_by" DROP DEFAULT;
