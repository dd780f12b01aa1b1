import { z } from 'zod';
import { builder } from '../builder.ts';
import type { PaymentIntent } from '../domain/payments/provider.ts';
import type { PaymentView } from '../domain/payments/service.ts';
import { NotFound } from '../domain/problems.ts';
import { paymentRef as paymentRefSchema } from '../domain/teams/input.ts';
import { notFoundError } from './common.ts';

/** 1 cent to 100,000 yuan per top-up. */
const topUpAmount = z.number().int().min(1, 'amountCents must be at least 1').max(10_000_000, 'amountCents must be at most 10000000 (100,000 yuan)');

export const PaymentIntentRef = builder.objectRef<PaymentIntent>('PaymentIntent').implement({
  description: "A payment the server asked for. Pay it with the provider; the provider's signed notify (POST /payments/notify) settles it.",
  fields: (t) => ({
    paymentRef: t.exposeString('paymentRef', { description: 'Minted by the server for this caller and purpose; unguessable.' }),
    amountCents: t.exposeInt('amountCents'),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      description:
        "Pay by then (the provider's order expiry). A seat payment's comes a grace before its seat frees (the lock's expiry, or the team's deadline if sooner): a tenth of the lock's lockSeconds, at most 30 s, for the provider's notify to arrive. A notify that arrives once the seat has freed seats no one, and the money is owed back.",
    }),
  }),
});

const PaymentStatusEnum = builder.enumType('PaymentStatus', {
  description: "PENDING until the provider's notify says the payment SUCCEEDED or FAILED.",
  values: ['PENDING', 'SUCCEEDED', 'FAILED'] as const,
});
const PaymentPurposeEnum = builder.enumType('PaymentPurpose', {
  description: "What a payment is for. TEAM_SEAT: a group-buy seat the payer locked (lockTeamSeat). WALLET_TOP_UP: money into the payer's wallet (topUpWallet).",
  values: ['TEAM_SEAT', 'WALLET_TOP_UP'] as const,
});

/** The types only the development schema has (src/schema/index.ts drops them in production). */
export const DEVELOPMENT_ONLY = { mutations: ['sandboxPay'], types: ['SandboxPayment'] };

const SandboxPayment = builder.objectRef<PaymentView & { outcome: string }>('SandboxPayment').implement({
  description: 'Development only: a payment the sandbox provider paid.',
  fields: (t) => ({
    paymentRef: t.exposeString('paymentRef'),
    purpose: t.expose('purpose', { type: PaymentPurposeEnum }),
    amountCents: t.exposeInt('amountCents'),
    status: t.expose('status', { type: PaymentStatusEnum }),
    outcome: t.exposeString('outcome', { description: 'What the notify did: SEATED, REFUND_OWED, CREDITED, DUPLICATE_REFUND_OWED.' }),
  }),
});

builder.mutationField('topUpWallet', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: PaymentIntentRef,
    description:
      "A payment of amountCents (1 to 10,000,000) into the caller's wallet: credited when the provider's notify says it SUCCEEDED. BAD_USER_INPUT (issue WALLET_BALANCE_LIMIT) when the wallet could not hold it (at most 2,147,483,647 cents); one paid when the wallet has filled up since is owed back (a WALLET_FULL refund).",
    args: { amountCents: t.arg.int({ required: true, validate: topUpAmount }) },
    resolve: (_root, { amountCents }, { app, viewer }) => app.payments.topUp(viewer.userId, amountCents),
  }),
);

builder.mutationField('sandboxPay', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: SandboxPayment,
    description:
      "Development only (absent from the schema in production, and while PAYMENT_WEBHOOK_SECRET is set unless SANDBOX_PAYMENTS=1): pays one of the caller's payments as the provider would, with a signed SUCCEEDED notify through POST /payments/notify's handler.",
    args: { paymentRef: t.arg.string({ required: true, validate: paymentRefSchema }) },
    resolve: async (_root, { paymentRef }, context) => {
      const paid = await context.app.payments.sandboxPay(context.viewer.userId, paymentRef);
      if (!paid) throw notFoundError(new NotFound('payment', paymentRef), context);
      return paid;
    },
  }),
);
