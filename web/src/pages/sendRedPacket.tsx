import { useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { ApiError, request } from '../api.ts';
import { graphql } from '../gql/index.ts';
import { useOncePerIntent } from '../oncePerIntent.ts';
import { useOneAtATime } from '../oneAtATime.ts';

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

/** The server's bounds (src/domain/redPackets/input.ts and split.ts): checked here first, so a slip reads as the field it is in. */
const MAX_TOTAL_CENTS = 100_000_000;
const MAX_COUNT = 10_000;
const GREETING_MAX = 64;

const FIELDS: Record<string, string> = { totalAmount: '总金额', count: '红包个数', greeting: '祝福语' };

/** What is wrong with the form, a field named in each message; null when the server may have it. */
function formProblem(yuan: string, count: string, greeting: string): string | null {
  const amount = yuan.trim();
  if (!/^\d+(\.\d{1,2})?$/.test(amount)) return '总金额：请输入金额，如 10 或 8.88（最多两位小数）';
  const cents = Math.round(Number(amount) * 100);
  if (cents < 1) return '总金额：至少 0.01 元';
  if (cents > MAX_TOTAL_CENTS) return `总金额：最多 ${MAX_TOTAL_CENTS / 100} 元`;
  if (!/^\d+$/.test(count.trim()) || Number(count) < 1 || Number(count) > MAX_COUNT) return `红包个数：请输入 1 到 ${MAX_COUNT} 之间的整数`;
  if (Number(count) > cents) return `总金额：${Number(count)} 个红包每个至少 0.01 元，至少要 ${(Number(count) / 100).toFixed(2)} 元`;
  if (greeting.trim().length > GREETING_MAX) return `祝福语：最多 ${GREETING_MAX} 个字`;
  return null;
}

/** A refusal of the server, each invalid input named by its field. */
function serverProblem(error: unknown): string {
  if (!(error instanceof ApiError) || error.issues.length === 0) return (error as Error).message;
  return error.issues
    .map((issue) => {
      const field = FIELDS[String(issue.path?.at(-1) ?? '')];
      return field ? `${field}：${issue.message}` : issue.message;
    })
    .join('；');
}

export function SendRedPacket() {
  const [yuan, setYuan] = useState('10');
  const [count, setCount] = useState('5');
  const [greeting, setGreeting] = useState('恭喜发财');
  const [problem, setProblem] = useState<string | null>(null);
  // A second tap while the first is on its way would send a second packet and pay twice.
  const [busy, oneAtATime] = useOneAtATime();
  // A tap again after an answer was lost on the way sends the same packet under the same
  // requestId, which the server makes and charges once; a changed packet is a new one.
  const oncePerIntent = useOncePerIntent();

  function send(event: Event) {
    event.preventDefault();
    return oneAtATime(async () => {
      const invalid = formProblem(yuan, count, greeting);
      setProblem(invalid);
      if (invalid) return;
      try {
        const packet = { totalAmount: Math.round(Number(yuan.trim()) * 100), count: Number(count.trim()), greeting: greeting.trim() };
        const { createRedPacket } = await oncePerIntent(JSON.stringify(packet), (requestId) => request(CreateRedPacket, { input: { ...packet, requestId } }));
        if ('id' in createRedPacket) location.hash = `#/packets/${createRedPacket.id}`;
        else setProblem(createRedPacket.message);
      } catch (error) {
        setProblem(serverProblem(error));
      }
    });
  }

  return (
    <form class="card" onSubmit={send} noValidate>
      <h2>发红包</h2>
      <label for="yuan">总金额（元）</label>
      <input id="yuan" inputMode="decimal" value={yuan} onInput={(event) => setYuan(event.currentTarget.value)} />
      <label for="count">红包个数</label>
      <input id="count" inputMode="numeric" value={count} onInput={(event) => setCount(event.currentTarget.value)} />
      <label for="greeting">祝福语（最多 {GREETING_MAX} 字）</label>
      <input id="greeting" maxLength={GREETING_MAX} value={greeting} onInput={(event) => setGreeting(event.currentTarget.value)} />
      <ActionButton type="submit" disabled={busy} acting={busy}>
        塞钱进红包
      </ActionButton>
      {problem && (
        <p class="problem" role="alert" data-testid="send-problem">
          {problem}
        </p>
      )}
    </form>
  );
}
