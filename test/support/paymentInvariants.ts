import type { Stores } from './stores.ts';

interface MemberRow {
  team_id: string;
  user_id: string;
  payment_ref: string | null;
  leader_id: string;
  status: string;
}
interface PaymentRow {
  payment_ref: string;
  user_id: string;
  team_id: string;
  status: string;
  amount_cents: number;
}
interface RefundRow {
  payment_ref: string;
  reason: string;
  amount_cents: number;
}

/**
 * The payment invariants of the teams listed, in PostgreSQL: every buyer who is a member
 * paid exactly once for that seat (one SUCCEEDED payment bound to them and the team, not
 * owed back unless the team FAILED); every SUCCEEDED payment that seated no one is owed
 * back exactly once; nothing unpaid is owed back; no payment is owed back twice.
 */
export async function paymentViolations(stores: Stores, teamIds: string[]): Promise<string[]> {
  const { rows: members } = await stores.sql.query<MemberRow>(
    'SELECT m.team_id, m.user_id, m.payment_ref, t.leader_id, t.status FROM team_member m JOIN team t ON t.id = m.team_id WHERE m.team_id = ANY($1)',
    [teamIds],
  );
  const { rows: payments } = await stores.sql.query<PaymentRow>(`SELECT payment_ref, user_id, team_id, status, amount_cents FROM payment WHERE team_id = ANY($1) AND purpose = 'TEAM_SEAT'`, [
    teamIds,
  ]);
  const { rows: refunds } = await stores.sql.query<RefundRow>('SELECT payment_ref, reason, amount_cents FROM refund WHERE payment_ref = ANY($1)', [payments.map((p) => p.payment_ref)]);
  const violations: string[] = [];
  // A second charge of one reference (DUPLICATE_PAYMENT) is owed back on its own; not counted here.
  const refundsOf = new Map<string, RefundRow[]>();
  for (const refund of refunds.filter((r) => r.reason !== 'DUPLICATE_PAYMENT')) refundsOf.set(refund.payment_ref, [...(refundsOf.get(refund.payment_ref) ?? []), refund]);
  const seatedBy = new Map(members.filter((m) => m.payment_ref !== null).map((m) => [m.payment_ref!, m]));

  for (const member of members) {
    if (member.user_id === member.leader_id) continue;
    const kept = payments.filter((p) => p.user_id === member.user_id && p.team_id === member.team_id && p.status === 'SUCCEEDED' && !refundsOf.has(p.payment_ref));
    const expected = member.status === 'FAILED' ? 0 : 1;
    if (kept.length !== expected) violations.push(`member ${member.user_id} of ${member.team_id} (${member.status}) keeps ${kept.length} paid payments, not ${expected}`);
    const own = payments.find((p) => p.payment_ref === member.payment_ref);
    if (own?.status !== 'SUCCEEDED' || own.user_id !== member.user_id || own.team_id !== member.team_id) {
      violations.push(`member ${member.user_id} of ${member.team_id} was seated by ${member.payment_ref}, not a SUCCEEDED payment of theirs for the team`);
    }
  }
  for (const payment of payments) {
    const owed = refundsOf.get(payment.payment_ref) ?? [];
    const seated = seatedBy.get(payment.payment_ref);
    const expected = payment.status !== 'SUCCEEDED' ? [] : !seated ? ['LATE_PAYMENT'] : seated.status === 'FAILED' ? ['TEAM_FAILED'] : [];
    if (JSON.stringify(owed.map((r) => r.reason)) !== JSON.stringify(expected)) {
      violations.push(
        `payment ${payment.payment_ref} (${payment.status}, ${seated ? `seated in a ${seated.status} team` : 'seated no one'}) is owed back ${JSON.stringify(owed.map((r) => r.reason))}, not ${JSON.stringify(expected)}`,
      );
    }
    for (const refund of owed)
      if (refund.amount_cents !== payment.amount_cents) violations.push(`payment ${payment.payment_ref} of ${payment.amount_cents} is owed back ${refund.amount_cents}`);
  }
  return violations;
}
