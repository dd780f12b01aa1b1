import { useEffect, useRef, useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { request, subscribe } from '../api.ts';
import type { WebRedPacketFieldsFragment } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Status } from '../live.tsx';
import { Loading, unlessNetwork, useReloadWhenOnline } from '../loading.tsx';
import { useOneAtATime } from '../oneAtATime.ts';
import { ShareLink } from '../shareLink.tsx';
import { handle } from '../users.ts';

graphql(`
  fragment WebRedPacketFields on RedPacket {
    id
    totalAmount
    count
    greeting
    status
    remainingCount
    remainingAmount
    expiresAt
    bestLuck {
      userId
      amount
    }
    latestShares(count: 5) {
      userId
      amount
    }
  }
`);

const RedPacketQuery = graphql(`
  query WebRedPacket($id: ID!) {
    redPacket(id: $id) {
      ...WebRedPacketFields
      myShare {
        amount
      }
    }
  }
`);

const RedPacketUpdated = graphql(`
  subscription WebRedPacketUpdated($packetId: ID!) {
    redPacketUpdated(packetId: $packetId) {
      ...WebRedPacketFields
    }
  }
`);

const Grab = graphql(`
  mutation WebGrabRedPacket($packetId: ID!) {
    grabRedPacket(packetId: $packetId) {
      __typename
      ... on GrabbedShare {
        amount
      }
      ... on AlreadyGrabbed {
        share {
          amount
        }
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

const yuan = (cents: number) => (cents / 100).toFixed(2);

/** A packet: grab it, and watch what is left, the newest grabs and the best luck live. */
export function RedPacketPage({ packetId }: { packetId: string }) {
  const [packet, setPacket] = useState<WebRedPacketFieldsFragment | null>(null);
  const [share, setShare] = useState<number | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [loadProblem, setLoadProblem] = useState<string | null>(null);
  const [busy, oneAtATime] = useOneAtATime();
  const shareLine = useRef<HTMLParagraphElement>(null);
  const problemLine = useRef<HTMLParagraphElement>(null);

  const load = () =>
    request(RedPacketQuery, { id: packetId }).then(
      ({ redPacket }) => {
        setLoadProblem(null);
        setProblem(unlessNetwork);
        if (!redPacket) return setProblem('红包不存在');
        setPacket(redPacket);
        // Grabbed before this page was (re)loaded: show the share, not a grab button.
        if (redPacket.myShare) setShare(redPacket.myShare.amount);
      },
      (error: Error) => setLoadProblem(error.message),
    );
  useReloadWhenOnline(load);
  useEffect(() => {
    void load();
    return subscribe(
      RedPacketUpdated,
      { packetId },
      ({ redPacketUpdated }) => setPacket(redPacketUpdated),
      (error) => setProblem(error.message),
    );
  }, [packetId]);

  const grab = () =>
    oneAtATime(
      async () => {
        setProblem(null);
        try {
          const { grabRedPacket: result } = await request(Grab, { packetId });
          if (result.__typename === 'GrabbedShare') setShare(result.amount);
          else if (result.__typename === 'AlreadyGrabbed') setShare(result.share.amount);
          else if ('message' in result) setProblem(result.message);
        } catch (error) {
          setProblem((error as Error).message);
        }
      },
      { thenFocus: () => shareLine.current ?? problemLine.current },
    );

  if (!packet) return <Loading problem={loadProblem ?? problem} retry={loadProblem ? load : undefined} />;
  return (
    <div class="card">
      <h2>{packet.greeting || '红包'}</h2>
      <Status>
        {share !== null && (
          <p ref={shareLine} tabIndex={-1}>
            你抢到{' '}
            <span class="big" data-testid="my-share">
              {yuan(share)}
            </span>{' '}
            元
          </p>
        )}
      </Status>
      <p>
        剩余 <span data-testid="remaining-count">{packet.remainingCount}</span> / {packet.count} 个，{yuan(packet.remainingAmount)} 元
      </p>
      {packet.bestLuck && <p class="muted">手气最佳：{yuan(packet.bestLuck.amount)} 元</p>}
      {packet.latestShares.length > 0 && (
        // The newest grabs, which every live event carries: never the whole list of shares.
        <ul class="plain" data-testid="latest-shares">
          {packet.latestShares.map((grabbed) => (
            <li key={grabbed.userId}>
              <span class="muted">{handle(grabbed.userId, '用户')}</span>
              <span>{yuan(grabbed.amount)} 元</span>
            </li>
          ))}
        </ul>
      )}
      <ActionButton onClick={grab} disabled={busy || share !== null || packet.status !== 'ACTIVE'} acting={busy}>
        {/* Mine taken, the button says so, whatever the packet's state since: it would not grab again. */}
        {share !== null ? '已抢到' : packet.status === 'ACTIVE' ? '抢' : packet.status === 'EMPTY' ? '已抢完' : '已过期'}
      </ActionButton>
      <ShareLink />
      {problem && (
        <p class="problem" role="alert" ref={problemLine} tabIndex={-1}>
          {problem}
        </p>
      )}
    </div>
  );
}
