import autocannon from 'autocannon';
import { tokenFor } from '../test/support/client.ts';
const url = 'http://127.0.0.1:4555/graphql';
const tok = await tokenFor('s');
for (const q of ['{ __typename }', 'mutation { grabRedPacket(packetId: "nope") { __typename } }']) {
  const t0 = performance.now();
  const res = await autocannon({ url, connections: 200, amount: 20000, method: 'POST', body: JSON.stringify({ query: q }), headers: { 'content-type': 'application/json', authorization: `Bearer ${tok}` } });
  console.log(q.slice(0, 30), (20000 / ((performance.now() - t0) / 1000)).toFixed(0), '/s p50', res.latency.p50, 'p99', res.latency.p99);
}
