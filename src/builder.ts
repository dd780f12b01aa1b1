import SchemaBuilder from '@pothos/core';
import ErrorsPlugin from '@pothos/plugin-errors';
import PrismaPlugin from '@pothos/plugin-prisma';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import ValidationPlugin from '@pothos/plugin-validation';
import { type Context, type SignedInContext, unauthenticated } from './context.ts';
import { BadInputError } from './domain/errors.ts';
import { ErrorCode, graphqlError } from './errors.ts';
import type PrismaTypes from './generated/pothos-prisma-types.ts';
import { getDatamodel } from './generated/pothos-prisma-types.ts';
import { AuthFailure, isOperator } from './infra/auth/tokens.ts';

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  AuthScopes: { signedIn: boolean; admin: boolean };
  // Fields built with t.withAuth({ signedIn: true }) or ({ admin: true }) get the viewer non-null.
  AuthContexts: { signedIn: SignedInContext; admin: SignedInContext };
  Scalars: { DateTime: { Input: Date; Output: Date | string } };
  DefaultFieldNullability: false;
}>({
  plugins: [ScopeAuthPlugin, ErrorsPlugin, ValidationPlugin, PrismaPlugin],
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
      context.viewer
        ? graphqlError(ErrorCode.forbidden, 'you do not have the role this operation needs')
        : unauthenticated(AuthFailure.missing, 'sign in: send Authorization: Bearer <token>'),
  },
  // Only the problem classes a field lists become union members; anything else stays a GraphQL error.
  errors: { defaultTypes: [] },
  validation: {
    validationError: (failure) =>
      BadInputError.of(
        failure.issues.map((issue) => ({
          path: issue.path?.map((part) => (typeof part === 'object' ? part.key : part) as string | number),
          message: issue.message,
        })),
      ),
  },
  prisma: {
    client: (context) => context.app.prisma,
    dmmf: getDatamodel(),
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
