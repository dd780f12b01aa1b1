import { useEffect, useRef, useState } from 'preact/hooks';
import { request } from '../api.ts';
import { yuan } from '../clock.ts';
import type { WebWalletQuery } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Loading, unlessNetwork, useReloadWhenOnline } from '../loading.tsx';

const WalletQuery = graphql(`
  query WebWallet($after: String) {
    me {
      wallet {
        balanceCents
        entries(first: 20, after: $after) {
          nodes {
            id
            createdAt
            deltaCents
            reason
            note
            refund {
              reason
            }
          }
          pageInfo {
            hasNextPage
            endCursor
          }
        }
      }
    }
  }
`);

type Entry = WebWalletQuery['me']['wallet']['entries']['nodes'][number];

const REASONS: Record<string, string> = {
  TOP_UP: '充值',
  OPERATOR_CREDIT: '平台入账',
  RED_PACKET_SENT: '发红包',
  RED_PACKET_GRAB: '抢红包',
  REFUND: '退款',
};

/** What a refund was owed for (Refund.reason). */
const REFUND_REASONS: Record<string, string> = {
  TEAM_FAILED: '拼团未成功',
  LATE_PAYMENT: '付款时座位已失效',
  DUPLICATE_PAYMENT: '重复付款',
  PACKET_EXPIRED: '红包过期未领完',
  WALLET_FULL: '钱包余额已达上限',
  DOUBLE_SEAT_REFUND: '重复退款',
};

/** My balance and the ledger behind it, newest first, a page at a time. */
export function Wallet() {
  const [balance, setBalance] = useState<number | null>(null);
  const [entries, setEntries] = useState<Entry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  // A second tap on "加载更多" before the first page arrives would ask for the same page again
  // and append it twice. The ref stops the tap at once; the state disables the button.
  const loading = useRef(false);
  const [busy, setBusy] = useState(false);

  async function load(after: string | null) {
    if (loading.current) return;
    loading.current = true;
    setBusy(true);
    setProblem(null);
    try {
      const { wallet } = (await request(WalletQuery, { after })).me;
      setBalance(wallet.balanceCents);
      // Entries are immutable and keyed by id: one already shown is never shown twice.
      setEntries((list) => {
        if (!after) return wallet.entries.nodes;
        const shown = new Set(list.map((entry) => entry.id));
        return [...list, ...wallet.entries.nodes.filter((entry) => !shown.has(entry.id))];
      });
      setNext(wallet.entries.pageInfo.hasNextPage ? (wallet.entries.pageInfo.endCursor ?? null) : null);
    } catch (error) {
      setProblem((error as Error).message);
    } finally {
      loading.current = false;
      setBusy(false);
    }
  }

  useEffect(() => {
    void load(null);
  }, []);
  // Reloaded, the first page would replace the pages already shown: those stay, and 加载更多 works again.
  useReloadWhenOnline(() => (balance === null ? load(null) : setProblem(unlessNetwork)));

  if (balance === null) return <Loading problem={problem} retry={() => load(null)} />;
  return (
    <div class="card">
      <h2>我的钱包</h2>
      <p>
        余额 ¥
        <span class="big" data-testid="wallet-balance">
          {yuan(balance)}
        </span>
      </p>
      <h3>明细</h3>
      {entries.length === 0 && <p class="muted">还没有记录</p>}
      <ul class="plain" data-testid="wallet-entries">
        {entries.map((entry) => (
          <li key={entry.id} data-testid="wallet-entry">
            <span>
              {REASONS[entry.reason] ?? entry.reason}
              {entry.note && <span class="muted"> · {entry.note}</span>}
              {entry.refund && <span class="muted"> · {REFUND_REASONS[entry.refund.reason] ?? entry.refund.reason}</span>}
              <br />
              <span class="muted">{new Date(entry.createdAt).toLocaleString('zh-CN')}</span>
            </span>
            <span class={entry.deltaCents > 0 ? 'credit' : 'debit'}>
              {entry.deltaCents > 0 ? '+' : ''}
              {yuan(entry.deltaCents)}
            </span>
          </li>
        ))}
      </ul>
      {next && (
        <button type="button" class="secondary" onClick={() => load(next)} disabled={busy} aria-busy={busy || undefined}>
          {busy ? '加载中…' : '加载更多'}
        </button>
      )}
      {problem && (
        <p class="problem" role="alert">
          {problem}
        </p>
      )}
    </div>
  );
}
