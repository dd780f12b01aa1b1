import { useEffect, useRef, useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { request, serverOffsetMs, subscribe } from '../api.ts';
import { countdown, useServerNow } from '../clock.ts';
import type { RedemptionDelivery, WebShopQuery } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Status } from '../live.tsx';
import { Loading, unlessNetwork, useReloadWhenOnline } from '../loading.tsx';
import { useOncePerIntent } from '../oncePerIntent.ts';
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
          saleStartsAt
          saleEndsAt
        }
      }
    }
    serverTime
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

type ShopGoods = WebShopQuery['goodsCatalog']['edges'][number]['node'];

/** Why an item cannot be redeemed at `nowMs` (the server's clock), or null when it can. */
function whyNot(goods: ShopGoods, nowMs: number): string | null {
  // An end is final and outranks a pause, as the server's refusal does.
  if (goods.saleEndsAt && nowMs >= Date.parse(goods.saleEndsAt)) return '已结束';
  if (!goods.onSale) return '暂停兑换';
  // A flash sale counts down to its start, and the button comes alive then.
  if (goods.saleStartsAt && nowMs < Date.parse(goods.saleStartsAt)) return `${countdown(Date.parse(goods.saleStartsAt), nowMs)} 后开兑`;
  return goods.remainingStock === 0 ? '已兑完' : null;
}

/** Whether a window's end is still to come, so the page must tick for it. */
const windowAhead = (goods: ShopGoods, nowMs: number) => [goods.saleStartsAt, goods.saleEndsAt].some((at) => at && Date.parse(at) > nowMs);

/** The points shop: my balance, the goods, and redeeming one, whose delivery is shown live. */
export function Shop() {
  const [shop, setShop] = useState<WebShopQuery | null>(null);
  // What the last attempt came to, under the item it was for; a page-wide problem (a failed load) is for no item.
  const [outcome, setOutcome] = useState<{ goodsId: string; text: string } | null>(null);
  const [loadProblem, setLoadProblem] = useState<string | null>(null);
  const [busy, oneAtATime, redeeming] = useOneAtATime();
  const outcomeLine = useRef<HTMLParagraphElement>(null);
  const oncePerIntent = useOncePerIntent();
  const [redemption, setRedemption] = useState<{ id: string; goodsId: string } | null>(null);
  const [delivery, setDelivery] = useState<RedemptionDelivery | null>(null);
  // The offset is taken as the answer arrives: serverTime is the server's now at that moment.
  const [offsetMs, setOffsetMs] = useState(0);
  const load = () =>
    request(ShopQuery, {}).then(
      (answer) => {
        setLoadProblem(null);
        setOutcome((shown) => (shown && unlessNetwork(shown.text) ? shown : null));
        setOffsetMs(serverOffsetMs(answer.serverTime));
        setShop(answer);
      },
      (error: Error) => setLoadProblem(error.message),
    );
  useEffect(() => void load(), []);
  useReloadWhenOnline(load);
  const now = useServerNow(offsetMs, !!shop?.goodsCatalog.edges.some(({ node }) => windowAhead(node, Date.now() + offsetMs)));

  // The stream ends by itself once delivered; a newer redemption or leaving the page closes it.
  useEffect(() => {
    if (!redemption) return;
    return subscribe(
      RedemptionUpdated,
      { redemptionId: redemption.id },
      ({ redemptionUpdated }) => setDelivery(redemptionUpdated.delivery),
      (error) => setOutcome({ goodsId: redemption.goodsId, text: error.message }),
    );
  }, [redemption]);

  // One tap at a time: a second tap while the first is on its way would redeem twice.
  const redeem = (goodsId: string) =>
    oneAtATime(
      async () => {
        // A new attempt: the last one's result and delivery are no longer the news, whichever item it was.
        setOutcome(null);
        setRedemption(null);
        setDelivery(null);
        try {
          // A tap again after a lost answer redeems this item under the same requestId: charged once.
          const { redeemPoints: result } = await oncePerIntent(goodsId, (requestId) => request(Redeem, { goodsId, requestId }));
          setOutcome({ goodsId, text: result.__typename === 'Redemption' ? `兑换成功 ${result.voucherCode ?? ''}`.trim() : result.message });
          if (result.__typename === 'Redemption') setRedemption({ id: result.id, goodsId });
          await load();
        } catch (error) {
          setOutcome({ goodsId, text: (error as Error).message });
        }
      },
      { name: goodsId, thenFocus: () => outcomeLine.current },
    );

  if (!shop) return <Loading problem={loadProblem} retry={load} />;
  return (
    <>
      <div class="card">
        <p class="muted">我的积分</p>
        <p class="big" data-testid="points-balance">
          {shop.me.pointsBalance}
        </p>
      </div>
      <div class="card">
        <h2>兑换商品</h2>
        <ul class="plain">
          {shop.goodsCatalog.edges.map(({ node }) => {
            const refusal = whyNot(node, now);
            return (
              <li key={node.id}>
                <div>
                  {node.title}
                  <br />
                  <span class="muted">
                    <span class="nowrap">{node.pointsCost} 积分</span> · 剩 {node.remainingStock}
                  </span>
                  {/* Under the item it is about, named for a screen reader, which hears it without the list around it. */}
                  <Status>
                    {outcome?.goodsId === node.id && (
                      <p class="item-result" data-testid="outcome" ref={outcomeLine} tabIndex={-1}>
                        <span class="visually-hidden">{node.title}：</span>
                        {outcome.text}
                      </p>
                    )}
                    {delivery && redemption?.goodsId === node.id && (
                      <p class="item-result muted" data-testid="delivery">
                        {DELIVERY_TEXT[delivery]}
                      </p>
                    )}
                  </Status>
                </div>
                <ActionButton style={{ width: 'auto', marginTop: 0 }} disabled={busy || refusal !== null} onClick={() => redeem(node.id)} acting={redeeming === node.id} context={node.title}>
                  {refusal ?? '兑换'}
                </ActionButton>
              </li>
            );
          })}
        </ul>
      </div>
    </>
  );
}
