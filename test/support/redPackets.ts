import { CloseRedPacketDocument, CreateRedPacketDocument, type CreateRedPacketInput, GrabRedPacketDocument, PacketPeopleDocument, RedPacketDocument } from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { As } from './tokens.ts';

/** The red-packet operations as one user at a time, against one server. */
export function redPacketsAt(url: string) {
  const { raw, data, attempt } = requestsAt(url);
  return {
    raw,
    /**
     * A shop-funded packet, created by `sender` as an operator: tests of the engine itself
     * need no wallets. Wallet-funded packets are sent with `send`.
     */
    async create(sender: string, input: CreateRedPacketInput) {
      const created = (await data(CreateRedPacketDocument, { input: { fundedBy: 'SHOP', ...input } }, sender, { admin: true })).createRedPacket;
      if (created.__typename !== 'RedPacket') throw new Error(`createRedPacket answered ${created.__typename}`);
      return created;
    },
    /** A packet the sender's wallet pays for, as the user: the packet, or InsufficientFunds. */
    async send(sender: string, input: CreateRedPacketInput) {
      return (await data(CreateRedPacketDocument, { input }, sender)).createRedPacket;
    },
    async grab(user: string, packetId: string) {
      return (await data(GrabRedPacketDocument, { packetId }, user)).grabRedPacket;
    },
    /** A grab that answers its errors instead of throwing them. */
    tryGrab(user: string, packetId: string) {
      return attempt(GrabRedPacketDocument, { packetId }, 'grabRedPacket', user);
    },
    async close(operator: string, packetId: string) {
      return (await data(CloseRedPacketDocument, { packetId }, operator, { admin: true })).closeRedPacket;
    },
    /** The packet with its shares. */
    async packet(viewer: string, id: string, as: As = {}) {
      return (await data(RedPacketDocument, { id }, viewer, as)).redPacket;
    },
    /** Every user id the packet shows. */
    async people(viewer: string, id: string, as: As = {}) {
      return (await data(PacketPeopleDocument, { id }, viewer, as)).redPacket;
    },
  };
}

export type RedPacketsClient = ReturnType<typeof redPacketsAt>;
