/**
 * Bulk operator actions on the operations table (issue 22 item 4): on the
 * rows selected, or on everything the table's filter matches. Retry applies
 * to dead operations, requeue and cancel (with a reason) to live ones. A
 * confirmation says what will be acted on and the cap first; the result says
 * in words what changed and what was skipped and why.
 *
 * Selected rows go one by one through `retryOperation` / `requeueOperation`
 * / `cancelOperation` with the version the table shows (a CAS each: a row a
 * worker moved since is skipped, "changed since this page loaded it"). The
 * filter goes to `retryOperations` / `requeueOperations` /
 * `cancelOperations`: all of it in one transaction, at most
 * {@link BULK_CAP} operations (the server's maximum), newest first.
 */
import { useState, type FormEvent } from 'react';
import { useMutation } from 'urql';
import {
  CancelOperationDocument,
  CancelOperationsDocument,
  RequeueOperationDocument,
  RequeueOperationsDocument,
  RetryOperationDocument,
  RetryOperationsDocument,
  type ConsoleOperationRowFragment,
  type OperationFilter,
} from '../../../client/generated/graphql';

/** The most operations one bulk call changes (the API's maximum `cap`). */
export const BULK_CAP = 1_000;

type Action = 'retry' | 'requeue' | 'cancel';
const LIVE = new Set(['ATTEMPTED', 'RECONCILE_ONLY']);

const VERB: Record<Action, [label: string, past: string, appliesTo: string]> = {
  retry: ['Retry', 'Retried', 'dead operations: it gives them a fresh budget of attempts, due now'],
  requeue: ['Requeue now', 'Requeued', 'live operations: it makes them due now and clears a deferral'],
  cancel: ['Cancel', 'Cancelled', 'live operations: it gives them up, with your reason as their last error'],
};

/** The confirming button: on the selected rows, or on everything the filter matches. */
const CONFIRM: Record<Action, Record<'selected' | 'all', string>> = {
  retry: { selected: 'Retry them', all: 'Retry all' },
  requeue: { selected: 'Requeue them now', all: 'Requeue all now' },
  cancel: { selected: 'Cancel them', all: 'Cancel all' },
};

function applies(action: Action, state: string): boolean {
  return action === 'retry' ? state === 'DEAD' : LIVE.has(state);
}

/** Why a row's action was refused, in a few words (grouped in the result). */
function refusalWords(typename: string | undefined): string {
  switch (typename) {
    case 'StaleVersionError':
      return 'changed since this page loaded it';
    case 'InvalidStateError':
      return 'no longer in a state the action applies to';
    case 'ForbiddenError':
      return 'not yours to act on';
    case 'NotFoundError':
      return 'gone';
    default:
      return 'refused by the server';
  }
}

/** "3 not dead, 1 changed since this page loaded it" */
function tally(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  return [...counts].map(([reason, n]) => `${n} ${reason}`).join(', ');
}

type Target = { kind: 'selected'; rows: ConsoleOperationRowFragment[] } | { kind: 'filter'; filter: OperationFilter; matching: number; capped: boolean };

export function BulkActions({
  selected,
  filter,
  matching,
  matchingCapped,
  onDone,
}: {
  selected: ConsoleOperationRowFragment[];
  filter: OperationFilter;
  /** How many operations the filter matches (the table's total). */
  matching: number;
  matchingCapped: boolean;
  onDone: (clearSelection: boolean) => void;
}) {
  const [pending, setPending] = useState<{ action: Action; target: Target } | null>(null);
  const [result, setResult] = useState<{ ok: boolean; words: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [, retryOne] = useMutation(RetryOperationDocument);
  const [, requeueOne] = useMutation(RequeueOperationDocument);
  const [, cancelOne] = useMutation(CancelOperationDocument);
  const [, retryMany] = useMutation(RetryOperationsDocument);
  const [, requeueMany] = useMutation(RequeueOperationsDocument);
  const [, cancelMany] = useMutation(CancelOperationsDocument);
  const filtered = Object.keys(filter).length > 0;
  if (selected.length === 0 && !filtered && result === null) return null;

  const runSelected = async (action: Action, rows: ConsoleOperationRowFragment[], reason: string) => {
    const [, past, appliesTo] = VERB[action];
    const skipped: string[] = [];
    let changed = 0;
    for (const row of rows) {
      if (!applies(action, row.state)) {
        skipped.push(action === 'retry' ? 'not dead' : 'not live');
        continue;
      }
      const input = { id: row.id, version: row.version };
      const answer =
        action === 'retry' ? await retryOne({ input }) : action === 'requeue' ? await requeueOne({ input }) : await cancelOne({ input: { ...input, reason } });
      const payload = answer.data === undefined ? undefined : (Object.values(answer.data)[0] as { __typename?: string } | undefined);
      if (answer.error !== undefined) skipped.push(`failed (${answer.error.message})`);
      else if (payload?.__typename === 'OperationPayload') changed++;
      else skipped.push(refusalWords(payload?.__typename));
    }
    const words = `${past} ${changed} of ${rows.length} selected.${skipped.length > 0 ? ` Skipped ${skipped.length}: ${tally(skipped)}. This action applies to ${appliesTo}.` : ''}`;
    setResult({ ok: changed > 0 || skipped.length === 0, words });
    onDone(true);
  };

  const runFilter = async (action: Action, target: Extract<Target, { kind: 'filter' }>, reason: string) => {
    const [, past, appliesTo] = VERB[action];
    const input = { filter: target.filter, cap: BULK_CAP };
    const answer = action === 'retry' ? await retryMany({ input }) : action === 'requeue' ? await requeueMany({ input }) : await cancelMany({ input: { ...input, reason } });
    const payload = answer.data === undefined ? undefined : (Object.values(answer.data)[0] as { __typename?: string; changed?: number; more?: boolean; message?: string } | undefined);
    if (answer.error !== undefined) setResult({ ok: false, words: `Nothing changed: ${answer.error.message}` });
    else if (payload?.__typename !== 'BulkOperationActionPayload') setResult({ ok: false, words: `Nothing changed: ${payload?.message ?? 'the server refused the action'}.` });
    else {
      const changed = payload.changed ?? 0;
      const skipped = payload.more ? 0 : Math.max(0, target.matching - changed);
      let words = `${past} ${changed} of the ${target.capped ? 'at least ' : ''}${target.matching} matching.`;
      if (skipped > 0) words += ` Skipped ${skipped}: the action applies only to operations you may act on, and only to ${appliesTo}.`;
      if (payload.more) words += ` More matched than the cap of ${BULK_CAP}: run it again for the rest.`;
      setResult({ ok: true, words });
    }
    onDone(false);
  };

  const confirm = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (pending === null) return;
    const reason = String(new FormData(event.currentTarget).get('reason') ?? '').trim();
    if (pending.action === 'cancel' && reason === '') return;
    setBusy(true);
    try {
      if (pending.target.kind === 'selected') await runSelected(pending.action, pending.target.rows, reason);
      else await runFilter(pending.action, pending.target, reason);
    } finally {
      setBusy(false);
      setPending(null);
    }
  };

  const ask = (action: Action, target: Target) => {
    setResult(null);
    setPending({ action, target });
  };
  const buttons = (target: Target, suffix: string) =>
    (['retry', 'requeue', 'cancel'] as const).map((action) => (
      <button key={action} type="button" className={action === 'cancel' ? 'danger' : 'secondary'} disabled={busy || pending !== null} data-testid={`bulk-${action}-${suffix}`} onClick={() => ask(action, target)}>
        {VERB[action][0]}
        {action === 'cancel' ? '…' : ''}
      </button>
    ));

  return (
    <section className="bulk" aria-label="Bulk actions" data-testid="bulk-bar">
      {selected.length > 0 && (
        <div className="bulk-row">
          <strong>{selected.length} selected:</strong> {buttons({ kind: 'selected', rows: selected }, 'selected')}
        </div>
      )}
      {filtered && matching > 0 && (
        <div className="bulk-row">
          <strong>
            Everything matching this filter ({matchingCapped ? 'at least ' : ''}
            {matching}):
          </strong>{' '}
          {buttons({ kind: 'filter', filter, matching, capped: matchingCapped }, 'filter')}
        </div>
      )}
      {pending !== null && (
        <form className="confirm" onSubmit={confirm} data-testid="bulk-confirm">
          <span>
            {VERB[pending.action][0]}{' '}
            {pending.target.kind === 'selected' ? (
              <>
                the <strong>{pending.target.rows.length}</strong> selected operation{pending.target.rows.length === 1 ? '' : 's'} ({pending.target.rows.filter((row) => applies(pending.action, row.state)).length} of them{' '}
                {pending.action === 'retry' ? 'dead' : 'live'}; the others are skipped)?
              </>
            ) : (
              <>
                every operation matching this filter that the action applies to: {pending.target.capped ? 'at least ' : ''}
                <strong>{pending.target.matching}</strong> match, at most <strong>{BULK_CAP}</strong> change in one go, all or nothing?
              </>
            )}{' '}
            It applies to {VERB[pending.action][2]}.
          </span>
          {pending.action === 'cancel' && (
            <label>
              <span>Reason (recorded on each)</span>
              <input name="reason" required maxLength={500} autoFocus placeholder="duplicate of …" />
            </label>
          )}
          <button type="submit" className={pending.action === 'cancel' ? 'danger' : undefined} disabled={busy} data-testid="bulk-confirm-yes">
            {CONFIRM[pending.action][pending.target.kind === 'selected' ? 'selected' : 'all']}
          </button>
          <button type="button" className="link" onClick={() => setPending(null)}>
            Keep them
          </button>
        </form>
      )}
      {result !== null && (
        <p className={result.ok ? 'notice ok' : 'notice bad'} role="status" data-testid="bulk-result">
          {result.words}
        </p>
      )}
    </section>
  );
}
