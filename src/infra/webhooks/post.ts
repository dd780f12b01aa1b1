/**
 * POSTs a JSON body to a webhook; throws unless it answers 2xx within `timeoutMs`, so the
 * caller's outbox tries again. A redirect is an answer like any other non-2xx: followed,
 * fetch would turn the POST into a GET of the new location and take that page's 200 for
 * a delivery, or carry the signed body to another host.
 */
export async function postToWebhook(what: string, url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  });
  await response.body?.cancel();
  if (!response.ok) throw new Error(`the ${what} webhook answered ${response.status}`);
}
