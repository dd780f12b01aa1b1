import { CloseRedPacketDocument, CreateRedPacketDocument, type CreateRedPacketInput, GrabRedPacketDocument, PacketPeopleDocument, RedPacketDocument } from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { As } from './tokens.ts';

/** The red-packet operations as one user at a time, against one server. */
export function redPacketsAt(url: string) {
  const { raw, data, attempt } = requestsAt(url);
  return {
    raw,
    async create(sender: string, input: CreateRedPacketInput) {
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
