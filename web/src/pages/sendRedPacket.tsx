import { useState } from 'preact/hooks';
import { request } from '../api.ts';
import { graphql } from '../gql/index.ts';

const CreateRedPacket = graphql(`
  mutation WebCreateRedPacket($input: CreateRedPacketInput!) {
    createRedPacket(input: $input) {
      ... on RedPacket {
        id
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

export function SendRedPacket() {
  const [yuan, setYuan] = useState('10');
  const [count, setCount] = useState('5');
  const [greeting, setGreeting] = useState('恭喜发财');
  const [problem, setProblem] = useState<string | null>(null);
  // A second tap while the first is on its way would send a second packet and pay twice.
  const [busy, setBusy] = useState(false);

  async function send(event: Event) {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setProblem(null);
    try {
      const input = { totalAmount: Math.round(Number(yuan) * 100), count: Number(count), greeting };
      const { createRedPacket } = await request(CreateRedPacket, { input });
      if ('id' in createRedPacket) location.hash = `#/packets/${createRedPacket.id}`;
      else setProblem(createRedPacket.message);
    } catch (error) {
      setProblem((error as Error).message);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="card" onSubmit={send}>
      <h2>发红包</h2>
      <label for="yuan">总金额（元）</label>
      <input id="yuan" inputMode="decimal" value={yuan} onInput={(event) => setYuan(event.currentTarget.value)} />
      <label for="count">红包个数</label>
      <input id="count" inputMode="numeric" value={count} onInput={(event) => setCount(event.currentTarget.value)} />
      <label for="greeting">祝福语</label>
      <input id="greeting" value={greeting} onInput={(event) => setGreeting(event.currentTarget.value)} />
      <button type="submit" disabled={busy}>
        塞钱进红包
      </button>
      {problem && <p class="problem">{problem}</p>}
    </form>
  );
}
