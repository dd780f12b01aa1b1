import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { printSchemaSdl } from '../src/schema/index.ts';

describe('schema.graphql', () => {
  it('matches the schema the code builds (run `npm run schema:print` after changing it)', () => {
    const committed = readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8');
    expect(committed).toBe(printSchemaSdl());
  });

  it('keeps the public contract names of API.md', () => {
    const sdl = printSchemaSdl();
    for (const name of [
      'enum SplitMode',
      'enum RedPacketStatus',
      'input CreateRedPacketInput',
      'type RedPacket ',
      'type RedPacketShare',
      'union GrabRedPacketResult = AlreadyGrabbed | GrabbedShare | NotFound | RedPacketEmpty | RedPacketExpired',
      'type AlreadyGrabbed implements Problem',
      'interface Problem',
      'createRedPacket(input: CreateRedPacketInput!): RedPacket!',
      'grabRedPacket(packetId: ID!): GrabRedPacketResult!',
      'redPacket(id: ID!): RedPacket',
      'redPacketUpdated(packetId: ID!): RedPacket!',
    ]) {
      expect(sdl).toContain(name);
    }
  });
});
