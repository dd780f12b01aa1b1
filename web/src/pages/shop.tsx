import { useEffect, useState } from 'preact/hooks';
import { request, subscribe } from '../api.ts';
import type { RedemptionDelivery, WebShopQuery } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { useOneAtATime } from '../oneAtATime.ts';

const ShopQuery = graphql(`
  query WebShop {
    me {
      pointsBalance
    }
    goodsCatalog(first: 50) {
      edges {
        node {
          id
          title
          pointsCost
          remainingStock
          onSale
        }
      }
    }
  }
`);

const Redeem = graphql(`
  mutation WebRedeemPoints($goodsId: ID!, $requestId: String!) {
    redeemPoints(goodsId: $goodsId, requestId: $requestId) {
      __typename
      ... on Redemption {
        id
        voucherCode
        status
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

const RedemptionUpdated = graphql(`
  subscription WebRedemptionUpdated($redemptionId: ID!) {
    redemptionUpdated(redemptionId: $redemptionId) {
      id
      delivery
      nextDeliveryAttemptAt
    }
  }
`);

const DELIVERY_TEXT: Record<RedemptionDelivery, string> = { QUEUED: '发放中…', RETRYING: '发放未成功，稍后自动重试', DELIVERED: '已发放' };

/** What an item's button says: why it cannot be redeemed, when it cannot. */
const redeemLabel = (goods: { onSale: boolean; remainingStock: number }) => (!goods.onSale ? '暂停兑换' : goods.remainingStock === 0 ? '已兑完' : '兑换');

/** The points shop: my balance, the goods, and redeeming one, whose delivery is shown live. */
export function Shop() {
  const [shop, setShop] = useState<WebShopQuery | null>(null);
  const [outcome, setOutcome] = useState<string | null>(null);
  const [busy, oneAtATime] = useOneAtATime();
  const [redemptionId, setRedemptionId] = useState<string | null>(null);
  const [delivery, setDelivery] = useState<RedemptionDelivery | null>(null);
  const load = () => request(ShopQuery, {}).then(setShop, (error: Error) => setOutcome(error.message));
  useEffect(() => void load(), []);

  // The stream ends by itself once delivered; a newer redemption or leaving the page closes it.
  useEffect(() => {
    if (!redemptionId) return;
    return subscribe(
      RedemptionUpdated,
      { redemptionId },
      ({ redemptionUpdated }) => setDelivery(redemptionUpdated.delivery),
      (error) => setOutcome(error.message),
    );
  }, [redemptionId]);

  // One tap at a time: a second tap while the first is on its way would redeem twice.
  const redeem = (goodsId: string) =>
    oneAtATime(async () => {
      try {
        // One requestId per tap: a retry of the same tap is answered, not charged, twice.
        const { redeemPoints: result } = await request(Redeem, { goodsId, requestId: crypto.randomUUID() });
        setOutcome(result.__typename === 'Redemption' ? `兑换成功 ${result.voucherCode ?? ''}` : result.message);
        if (result.__typename === 'Redemption') {
          setDelivery(null);
          setRedemptionId(result.id);
        }
        await load();
      } catch (error) {
        setOutcome((error as Error).message);
      }
    });

  if (!shop) {
    return (
      <div class="card" role="status">
        {outcome ?? '…'}
      </div>
    );
  }
  return (
    <>
      <div class="card">
        <p class="muted">我的积分</p>
        <p class="big" data-testid="points-balance">
          {shop.me.pointsBalance}
        </p>
      </div>
      <div class="card">
        <ul class="plain">
          {shop.goodsCatalog.edges.map(({ node }) => (
            <li key={node.id}>
              <span>
                {node.title}
                <br />
                <span class="muted">
                  {node.pointsCost} 积分 · 剩 {node.remainingStock}
                </span>
              </span>
              <button type="button" style={{ width: 'auto', marginTop: 0 }} disabled={busy || !node.onSale || node.remainingStock === 0} onClick={() => redeem(node.id)}>
                {redeemLabel(node)}
              </button>
            </li>
          ))}
        </ul>
        {outcome && (
          <p role="status" aria-live="polite" data-testid="outcome">
            {outcome}
          </p>
        )}
        {delivery && (
          <p class="muted" data-testid="delivery">
            {DELIVERY_TEXT[delivery]}
          </p>
        )}
      </div>
    </>
  );
}
