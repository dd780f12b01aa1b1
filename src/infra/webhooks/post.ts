/**
 * POSTs a JSON body to a webhook; throws unless it answers 2xx within `timeoutMs`, so the
 * caller's outbox tries again. A redirect is an answer like any other non-2xx: followed,
 * fetch would turn the POST into a GET of the new location and take that page's 200 for
 * a delivery, or carry the signed body to another host.
 */
export async function postToWebhook(what: string, url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    throw unreachable(what, error);
  }
  await response.body?.cancel();
  if (!response.ok) throw new Error(`the ${what} webhook answered ${response.status}`);
}

/**
 * A failed call as the outbox logs it and stores it (last_error, which operators read): its
 * message and its causes' ("fetch failed: connect ECONNREFUSED …"), with every URL in them
 * cut to origin and path. fetch quotes a URL it refuses whole, credentials and query string
 * (where a webhook may take its key) included. The original is not kept as the cause: a
 * logged error's causes are written out too.
 */
function unreachable(what: string, error: unknown): Error {
  const messages: string[] = [];
  for (let cause = error; cause instanceof Error && messages.length < 3; cause = cause.cause) messages.push(cause.message);
  return new Error(`the ${what} webhook could not be reached: ${withoutUrlSecrets(messages.join(': ') || String(error))}`);
}

const URL_IN_TEXT = /\b[a-z][a-z\d+.-]*:\/\/[^\s"'<>]+/gi;

function withoutUrlSecrets(text: string): string {
  return text.replace(URL_IN_TEXT, (found) => {
    if (!URL.canParse(found)) return '<a URL>';
    const { origin, pathname } = new URL(found);
    return `${origin}${pathname}`;
  });
}
