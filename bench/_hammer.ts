import autocannon from 'autocannon';
import { tokenFor } from '../test/support/client.ts';
const url = 'http://127.0.0.1:4555/graphql';
const sender = await tokenFor('s');
const tokens = await Promise.all(Array.from({ length: 10000 }, (_, i) => tokenFor(`u${i}`)));
for (let round = 0; round < 2; round++) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${sender}` }, body: JSON.stringify({ query: 'mutation { createRedPacket(input:{totalAmount:1000000,count:10000}) { id } }' }) });
  const id = ((await r.json()) as any).data.createRedPacket.id;
  let i = 0;
  const body = JSON.stringify({ query: `mutation { grabRedPacket(packetId: "${id}") { __typename ... on GrabbedShare { amount } } }` });
  const t0 = performance.now();
  const res = await autocannon({ url, connections: Number(process.env.CONN ?? 200), amount: 10000, method: 'POST', requests: [{ setupRequest: (req) => ({ ...req, body, headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[i++ % 10000]}` } }) }] });
  const wall = (performance.now() - t0) / 1000;
  console.log(`round ${round}: ${(res.requests.total / wall).toFixed(0)}/s (autocannon duration ${res.duration}) p50 ${res.latency.p50} p99 ${res.latency.p99} non2xx ${res.non2xx}`);
}
