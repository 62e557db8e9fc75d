/**
 * Live updates: subscriptions over the session's graphql-sse stream, and a
 * throttled re-read for views whose numbers an event changes (counts,
 * details with history) rather than replaces.
 */
import { useEffect, useRef } from 'react';
import { useSubscription } from 'urql';
import {
  ConsoleOperationsChangedDocument,
  ConsoleStoreChangedDocument,
  type ConsoleOperationRowFragment,
  type StoreChangeSubject,
} from '../../client/generated/graphql';

/** Calls `run` at most once per `ms`, trailing: a burst of events gives one call soon after the last. */
export function useThrottle(run: () => void, ms: number): () => void {
  const latest = useRef(run);
  latest.current = run;
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const last = useRef(0);
  useEffect(() => () => void (timer.current !== null && clearTimeout(timer.current)), []);
  return () => {
    if (timer.current !== null) return;
    const wait = Math.max(0, last.current + ms - Date.now());
    timer.current = setTimeout(() => {
      timer.current = null;
      last.current = Date.now();
      latest.current();
    }, wait);
  };
}

/**
 * Every committed change of an operation the viewer may see, to `onChange`.
 * Unfiltered on purpose: every view of every tab asks for the same
 * subscription, so the hub holds one for the whole browser (a view that
 * shows a filter re-reads, and the server applies it).
 */
export function useOperationChanges(onChange: (operation: ConsoleOperationRowFragment) => void): void {
  const handler = useRef(onChange);
  handler.current = onChange;
  useSubscription({ query: ConsoleOperationsChangedDocument, variables: { filter: null } }, (_previous, event) => {
    handler.current(event.operationsChanged);
    return event;
  });
}

/**
 * Changes of `subjects` not delivered node by node (retention deleting
 * operations, a backlog sample, a migration) to `onChange`: re-read what the
 * view shows. Unfiltered, like useOperationChanges: one subscription for the
 * whole browser, each view picking its subjects.
 */
export function useStoreChanges(subjects: readonly StoreChangeSubject[], onChange: () => void): void {
  const handler = useRef(onChange);
  handler.current = onChange;
  const wanted = useRef(subjects);
  wanted.current = subjects;
  useSubscription({ query: ConsoleStoreChangedDocument }, (_previous, event) => {
    if (wanted.current.includes(event.storeChanged.subject)) handler.current();
    return event;
  });
}

/** Re-reads (via `refetch`) when any visible operation changes, or many did (retention), at most twice a second. */
export function useLiveRefetch(refetch: () => void): void {
  const throttled = useThrottle(refetch, 500);
  useOperationChanges(throttled);
  useStoreChanges(['OPERATIONS'], throttled);
}
