/** This page's address, to send to others: a packet to grab, a team to join. */
export function ShareLink() {
  return (
    <p class="muted">
      分享链接：<span data-testid="share-link">{location.href}</span>
    </p>
  );
}
