import SchemaBuilder from '@pothos/core';
import ErrorsPlugin from '@pothos/plugin-errors';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import ValidationPlugin from '@pothos/plugin-validation';
import { type Context, type SignedInContext, unauthenticated } from './context.ts';
import { Problem } from './domain/problems.ts';
import { ErrorCode, graphqlError } from './errors.ts';
import type PrismaTypes from './generated/pothos-prisma-types.ts';
import { getDatamodel } from './generated/pothos-prisma-types.ts';
import { badInput } from './i18n/issues.ts';
import { errorMessage } from './i18n/messages.ts';
import { AuthFailure, isOperator } from './infra/auth/tokens.ts';
import { businessRefusals } from './infra/metrics.ts';

/** A problem's stable code (TEAM_FULL, OUT_OF_STOCK…); any other error a union lists, its class name. */
const problemCode = (error: Error) => (error instanceof Problem ? error.code : error.name);

/** Counts a problem a field answers with (business_refusals_total): the errors plugin calls it, and so does a union built by hand (drawLottery). */
export function countRefusal(problem: Error): void {
  businessRefusals.inc({ code: problemCode(problem) });
}

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  AuthScopes: { signedIn: boolean; admin: boolean };
  // Fields built with t.withAuth({ signedIn: true }) or ({ admin: true }) get the viewer non-null.
  AuthContexts: { signedIn: SignedInContext; admin: SignedInContext };
  Scalars: { DateTime: { Input: Date; Output: Date | string } };
  DefaultFieldNullability: false;
}>({
  plugins: [ScopeAuthPlugin, ErrorsPlugin, ValidationPlugin, RelayPlugin, PrismaPlugin],
  // Lists are cursor connections, with `nodes` beside `edges` for clients that need no cursor per row;
  // Node and global ids are not used (ids stay the plain ids of the contract).
  relay: { nodeQueryOptions: false, nodesQueryOptions: false, nodesOnConnection: true },
  defaultFieldNullability: false,
  scopeAuth: {
    // Check a subscription's scopes when it starts: a stream of events (a winners ticker)
    // may stay silent for a long time, and must not reveal whether its subject exists.
    authorizeOnSubscribe: true,
    authScopes: (context) => ({
      signedIn: context.viewer !== null,
      admin: isOperator(context.viewer),
    }),
    unauthorizedError: (_parent, context) =>
      context.viewer ? graphqlError(ErrorCode.forbidden, errorMessage('ROLE_MISSING', context.locale)) : unauthenticated(AuthFailure.missing, 'SIGN_IN', context.locale),
  },
  // Only the problem classes a field lists become union members; anything else stays a GraphQL error.
  // Every problem a field answers with passes here, once: the one place refusals are counted.
  errors: { defaultTypes: [], onResolvedError: (error) => countRefusal(error) },
  validation: {
    validationError: (failure, _args, context) => badInput(failure.issues, context.locale),
  },
  prisma: {
    client: (context) => context.app.prisma,
    dmmf: getDatamodel(),
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
