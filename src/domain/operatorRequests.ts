import { createHash } from 'node:crypto';
import { Prisma, type PrismaClient } from '../generated/prisma/client.ts';
import { ruleInputIssue } from '../i18n/issues.ts';
import { BadInputError } from './errors.ts';

/** What an operator creates once per requestId. */
export type CreatedKind = 'goods' | 'lottery' | 'groupBuy';

/** The row that makes a create once per requestId; the create writes it in its own transaction. */
export interface OperatorRequest {
  kind: CreatedKind;
  createdBy: string;
  requestId: string;
  digest: string;
}

/** An operator's requestId and the digest of the input it came with; null when it came without one. */
export function requestOf(input: { requestId?: string | null }): { requestId: string; digest: string } | null {
  const { requestId, ...terms } = input;
  if (!requestId) return null;
  // The parsed input: its keys come in the schema's order, so the same terms hash alike.
  return { requestId, digest: createHash('sha256').update(JSON.stringify(terms)).digest('hex') };
}

/** The request of a create, or null when it was sent without a requestId. */
export function operatorRequestOf(kind: CreatedKind, createdBy: string, input: { requestId?: string | null }): OperatorRequest | null {
  const request = requestOf(input);
  return request && { kind, createdBy, ...request };
}

/** The create's row, to add to the transaction that creates `objectId`. */
export function recordRequest(prisma: Pick<PrismaClient, 'operatorRequest'>, request: OperatorRequest, objectId: string) {
  return prisma.operatorRequest.create({ data: { ...request, objectId } });
}

/**
 * Runs an operator's create once per requestId. A retry with the same terms (after a
 * timeout, or racing the first call) gets the first object, from `firstOf`; with other
 * terms it is BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_CREATE). `create` must write the
 * request's row (recordRequest) in the transaction that creates the object: a racing
 * call then fails on its key, and answers with the winner's object.
 */
export async function createOncePerRequest<T>(prisma: PrismaClient, request: OperatorRequest | null, create: () => Promise<T>, firstOf: (objectId: string) => Promise<T>): Promise<T> {
  if (!request) return create();
  const answerFirst = async (first: { digest: string; objectId: string }) => {
    if (first.digest !== request.digest) {
      throw BadInputError.of([ruleInputIssue(['input', 'requestId'], 'REQUEST_ID_OF_ANOTHER_CREATE', { requestId: request.requestId })]);
    }
    return firstOf(first.objectId);
  };
  const firstCreate = () =>
    prisma.operatorRequest.findUnique({
      where: { kind_createdBy_requestId: { kind: request.kind, createdBy: request.createdBy, requestId: request.requestId } },
      select: { digest: true, objectId: true },
    });
  const first = await firstCreate();
  if (first) return answerFirst(first);
  try {
    return await create();
  } catch (error) {
    const racedAndLost = error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002';
    const winner = racedAndLost ? await firstCreate() : null;
    if (!winner) throw error;
    return answerFirst(winner);
  }
}
