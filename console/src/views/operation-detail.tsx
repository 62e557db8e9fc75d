/**
 * One operation: every readable field (the API has no field for a lease
 * token or send marker, so none can show), its attempt history with errors,
 * its watch, its document's connector state, and the operator actions
 * (retry, cancel with a reason, requeue) for a viewer who may use them: a
 * service principal or the operation's owner. Each action sends the version
 * this page shows (a CAS); a typed refusal is said in words. Live: each
 * committed change of the operation re-reads the page.
 */
import { useState, type FormEvent, type ReactNode } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import {
  CancelOperationDocument,
  ConsoleDocumentDocument,
  ConsoleOperationChangedDocument,
  ConsoleOperationDetailDocument,
  RequeueOperationDocument,
  RetryOperationDocument,
  type ConnectorOperationFieldsFragment,
  type OperationAttemptFieldsFragment,
} from '../../../client/generated/graphql';
import { useStoreChanges, useThrottle } from '../live';
import { Link } from '../router';
import { Badge, DID, Empty, ErrorState, Fields, JSONValue, Loading, mutationErrorWords, Time } from '../ui';
import type { Viewer } from '../session';

const LIVE = new Set(['ATTEMPTED', 'RECONCILE_ONLY']);

export function OperationDetail({ id, viewer }: { id: string; viewer: Viewer }) {
  const [result, refetch] = useQuery({ query: ConsoleOperationDetailDocument, variables: { id } });
  const reread = useThrottle(() => refetch({ requestPolicy: 'network-only' }), 300);
  useSubscription({ query: ConsoleOperationChangedDocument, variables: { id } }, (_previous, event) => {
    reread();
    return event;
  });
  // Retention may have deleted it (the page then says so), or a migration rewrote it.
  useStoreChanges(['OPERATIONS'], reread);
  const { data, fetching, error } = result;
  if (data === undefined && fetching) return <Loading what="the operation" />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  const op = data?.node?.__typename === 'ConnectorOperation' ? data.node : null;
  if (op === null || op === undefined)
    return (
      <Empty>
        No such operation, or not one you may see. <Link to="/operations">Back to operations</Link>
      </Empty>
    );
  const mayAct = viewer.isService || viewer.did === op.ownerDID;
  const history = op.attemptHistory;

  return (
    <div className="detail">
      <p className="crumbs">
        <Link to="/operations">Operations</Link> / <span>{op.operationID}</span>
      </p>
      <header className="detail-head">
        <h2>
          {op.operationID} <Badge value={op.state} />
        </h2>
        <p className="muted">
          {op.op.toLowerCase()} of a {op.model} on {op.connectorName} ({op.target}), version {op.version}
        </p>
      </header>
      {error !== undefined && <ErrorState error={error} />}

      <Now op={op} latest={history.edges.find(({ node }) => node.kind === 'ATTEMPT')?.node} />

      <Actions op={op} mayAct={mayAct} onDone={() => refetch({ requestPolicy: 'network-only' })} />

      <div className="panels">
        <section className="panel" aria-labelledby="op-fields">
          <h3 id="op-fields">Fields</h3>
          <Fields
            rows={[
              ['State', <Badge value={op.state} />],
              ['Attempts', op.attempts],
              ['Next attempt', leased(op) ? <span>when the lease ends (<Time value={op.leaseExpiresAt} />)</span> : <Time value={op.nextAttemptAt} />],
              ['Deferred for', <Badge value={op.deferReason} />],
              ['Lease expires', <Time value={op.leaseExpiresAt} empty="no lease" />],
              ['A request may have been sent', op.sendMarkerSet ? 'yes (a retry reconciles first)' : 'no'],
              ['Last outcome', <Badge value={op.lastKind} />],
              ['Last HTTP status', op.lastHTTPStatus],
              ['Provider ETag', op.providerEtag && <code>{op.providerEtag}</code>],
              ['Operation ID (idempotency key)', <code>{op.operationID}</code>],
              ['Caller', <DID value={op.callerDID} />],
              ['Owner', <DID value={op.ownerDID} />],
              ['Connector', op.connectorName],
              ['Model', op.model],
              ['Account', op.accountKey],
              ['Target', op.target],
              ['Source ID', op.sourceID && <code>{op.sourceID}</code>],
              ['Deterministic event ID', <code>{op.deterministicEventID}</code>],
              ['Payload hash', <code>{op.payloadHash}</code>],
              ['Reissue intent', op.reissueIntent],
              ['Document', op.documentID && <code>{op.documentID}</code>],
              ['Result entity', <JSONValue value={op.resultEntity} />],
              ['Version', op.version],
              ['Created', <Time value={op.createdAt} />],
              ['Updated', <Time value={op.updatedAt} />],
              ['ID', <code className="wrap">{op.id}</code>],
            ]}
          />
        </section>

        <section className="panel" aria-labelledby="op-watch">
          <h3 id="op-watch">Watch</h3>
          {op.watch === null ? (
            <p className="muted">No watch: finalize arms one when the write lands.</p>
          ) : (
            <Fields
              rows={[
                ['Status', <Link to={`/watches/${encodeURIComponent(op.watch.id)}`}><Badge value={op.watch.verificationStatus} /></Link>],
                ['Document', <code>{op.watch.documentID}</code>],
                ['Source ID', <code>{op.watch.sourceID}</code>],
                ['Generation', op.watch.repairGeneration],
                ['Verification attempts', op.watch.verificationAttempts],
                ['Next check', <Time value={op.watch.nextAttemptAt} />],
              ]}
            />
          )}
          <h3>Document</h3>
          {op.documentID === null ? <p className="muted">Not written yet: no document.</p> : <DocumentState documentID={op.documentID} />}
        </section>
      </div>

      <section className="panel panel-wide" aria-labelledby="op-history">
        <h3 id="op-history">
          History <span className="muted">({history.totalCount}, newest first: attempts, and what operators did)</span>
        </h3>
        {history.edges.length === 0 ? (
          <Empty>No attempt yet.</Empty>
        ) : (
          <ol className="timeline" data-testid="attempt-history">
            {history.edges.map(({ node: entry }) => (
              <TimelineEntry key={entry.seq} entry={entry} />
            ))}
          </ol>
        )}
      </section>
    </div>
  );
}

type Attempt = OperationAttemptFieldsFragment;

/** Whether a worker holds the operation's lease now. */
function leased(op: ConnectorOperationFieldsFragment): boolean {
  return op.leaseExpiresAt !== null && Date.parse(op.leaseExpiresAt) > Date.now();
}

/** A span of time in words: "0.4 s", "12 s", "3 min 5 s", "2 h 10 min". */
export function duration(fromISO: string, toISO: string): string {
  const ms = Math.max(0, Date.parse(toISO) - Date.parse(fromISO));
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}

/** What is happening to the operation now, its latest attempt and its last error: the top of the page. */
function Now({ op, latest }: { op: ConnectorOperationFieldsFragment; latest: Attempt | undefined }) {
  let now: ReactNode;
  if (leased(op)) {
    now = (
      <>
        Leased to its caller <DID value={op.callerDID} /> until <Time value={op.leaseExpiresAt} />: a worker is on it.
      </>
    );
  } else if (op.state === 'COMMITTED') {
    now = (
      <>
        Landed <Time value={op.updatedAt} />.
      </>
    );
  } else if (op.state === 'DEAD') {
    now = <>Given up after {op.attempts} {op.attempts === 1 ? 'attempt' : 'attempts'}: nothing will retry it unless someone does.</>;
  } else if (op.deferReason !== null) {
    now = (
      <>
        Waiting: <Badge value={op.deferReason} /> (not spending attempts); then due <Time value={op.nextAttemptAt} />.
      </>
    );
  } else {
    now = (
      <>
        {op.leaseExpiresAt !== null && (
          <>
            Its lease lapsed <Time value={op.leaseExpiresAt} />.{' '}
          </>
        )}
        Due <Time value={op.nextAttemptAt} />
        {op.sendMarkerSet ? ': a request may have reached the provider, so the next worker reconciles first.' : '.'}
      </>
    );
  }
  return (
    <section className="now" aria-label="Now" data-testid="operation-now">
      <p className="now-line">{now}</p>
      {latest !== undefined && (
        <p className="now-line" data-testid="latest-attempt">
          <strong>Latest attempt</strong> (#{latest.attempt}): started <Time value={latest.startedAt} />
          {latest.sentAt !== null ? <>, request sent after {duration(latest.startedAt, latest.sentAt)}</> : ', no request sent'}
          {latest.endedAt !== null ? <>, ended after {duration(latest.startedAt, latest.endedAt)}</> : ', still open'}
          {(latest.committed || latest.outcome !== null) && (
            <>
              {' '}
              → {latest.committed ? <Badge value="COMMITTED" /> : <Badge value={latest.outcome} />}
              {latest.httpStatus !== null && <span className="muted"> HTTP {latest.httpStatus}</span>}
            </>
          )}
        </p>
      )}
      {op.lastError !== null && (
        <div className="last-error" role="note">
          <strong>Last error</strong>
          <pre>{op.lastError}</pre>
        </div>
      )}
    </section>
  );
}

/** One entry of the history: an attempt (started → sent → ended, with how long each step took and how it ended) or an operator's action. */
function TimelineEntry({ entry }: { entry: Attempt }) {
  if (entry.kind !== 'ATTEMPT') {
    return (
      <li className="tl tl-action">
        <div className="tl-head">
          <Badge value={entry.kind} /> by <DID value={entry.actorDID} /> <Time value={entry.startedAt} />
        </div>
        {entry.message !== null && <p className="tl-message">{entry.message}</p>}
      </li>
    );
  }
  return (
    <li className={`tl tl-attempt${entry.committed ? ' tl-ok' : entry.outcome !== null ? ' tl-bad' : ''}`}>
      <div className="tl-head">
        <strong>Attempt {entry.attempt}</strong> {entry.committed ? <Badge value="COMMITTED" /> : entry.outcome !== null ? <Badge value={entry.outcome} /> : entry.endedAt === null ? <span className="muted">open</span> : null}
        {entry.httpStatus !== null && <span className="muted"> HTTP {entry.httpStatus}</span>}
        {entry.actorDID !== null && (
          <span className="muted">
            {' '}
            by <DID value={entry.actorDID} />
          </span>
        )}
      </div>
      <ol className="tl-steps">
        <li>
          started <Time value={entry.startedAt} />
        </li>
        <li>{entry.sentAt !== null ? <>request sent +{duration(entry.startedAt, entry.sentAt)}</> : <span className="muted">no request sent</span>}</li>
        <li>{entry.endedAt !== null ? <>ended +{duration(entry.startedAt, entry.endedAt)}</> : <span className="muted">not ended</span>}</li>
      </ol>
      {(entry.retryAfterMs !== null || entry.deferReason !== null) && (
        <p className="tl-sub">
          {entry.retryAfterMs !== null && <>provider asked to retry after {duration('1970-01-01T00:00:00Z', new Date(entry.retryAfterMs).toISOString())}. </>}
          {entry.deferReason !== null && (
            <>
              deferred: <Badge value={entry.deferReason} />
            </>
          )}
        </p>
      )}
      {entry.message !== null && <pre className="tl-message">{entry.message}</pre>}
    </li>
  );
}

function DocumentState({ documentID }: { documentID: string }) {
  const [{ data, fetching, error }] = useQuery({ query: ConsoleDocumentDocument, variables: { documentID } });
  if (data === undefined && fetching) return <Loading what="the document" />;
  if (error !== undefined) return <ErrorState error={error} />;
  const doc = data?.document;
  if (doc === undefined) return null;
  return (
    <Fields
      rows={[
        ['Document ID', <code>{doc.documentID}</code>],
        ['Connector work left', doc.hasConnectorWork ? 'yes' : 'none'],
        [
          'Operations',
          <ul className="plain">
            {doc.operations.map((other) => (
              <li key={other.id}>
                <Link to={`/operations/${encodeURIComponent(other.id)}`}>{other.operationID}</Link> <Badge value={other.state} />
              </li>
            ))}
          </ul>,
        ],
        ['Watch', doc.watch && <Link to={`/watches/${encodeURIComponent(doc.watch.id)}`}><Badge value={doc.watch.verificationStatus} /></Link>],
        ['Trimmed fields', doc.entityTrim && <JSONValue value={doc.entityTrim.trimmedFields} />],
        ['Sweep candidates', doc.sweepCandidates.length === 0 ? null : doc.sweepCandidates.map((c) => `${c.partition}: ${c.state.toLowerCase()}`).join(', ')],
        ['Repair', doc.repair && `${doc.repair.present ? 'present' : 'absent'}, written ${new Date(doc.repair.writtenAt).toLocaleString()}`],
      ]}
    />
  );
}

type ActionResult = { __typename?: string; message?: string; issues?: { path: string[]; message: string }[] };

function Actions({ op, mayAct, onDone }: { op: ConnectorOperationFieldsFragment; mayAct: boolean; onDone: () => void }) {
  const [retry, runRetry] = useMutation(RetryOperationDocument);
  const [cancel, runCancel] = useMutation(CancelOperationDocument);
  const [requeue, runRequeue] = useMutation(RequeueOperationDocument);
  const [outcome, setOutcome] = useState<{ ok: boolean; words: string } | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const [confirmingRetry, setConfirmingRetry] = useState(false);
  const busy = retry.fetching || cancel.fetching || requeue.fetching;
  const live = LIVE.has(op.state);

  if (!mayAct) {
    return <p className="muted actions-note">Only a service principal or the operation’s owner may retry, cancel or requeue it.</p>;
  }
  if (!live && op.state !== 'DEAD') return null;

  const report = (
    answer: { data?: { [field: string]: ActionResult & { operation?: { state: string } } } | undefined; error?: { message: string } | undefined },
    done: string | ((state: string) => string),
  ) => {
    const payload = answer.data === undefined ? undefined : Object.values(answer.data)[0];
    if (answer.error !== undefined) setOutcome({ ok: false, words: answer.error.message });
    else if (payload?.__typename === 'OperationPayload') setOutcome({ ok: true, words: typeof done === 'string' ? done : done(payload.operation?.state ?? '') });
    else if (payload !== undefined) setOutcome({ ok: false, words: mutationErrorWords(payload) });
    onDone();
  };
  const submitCancel = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const reason = String(new FormData(event.currentTarget).get('reason') ?? '').trim();
    if (reason === '') return;
    report(await runCancel({ input: { id: op.id, version: op.version, reason } }), 'Cancelled: it is dead now, with your reason as its last error.');
    setCancelling(false);
  };

  return (
    <section className="actions" aria-label="Operator actions">
      {op.state === 'DEAD' &&
        (!confirmingRetry ? (
          <button type="button" disabled={busy} data-testid="retry" onClick={() => setConfirmingRetry(true)}>
            Retry…
          </button>
        ) : (
          <div className="confirm" role="group" aria-label="Confirm the retry">
            <span>
              Retry <strong>{op.operationID}</strong>? It becomes live with a fresh budget of attempts and is due now
              {op.sendMarkerSet ? '; a request may have reached the provider, so the worker reconciles before resending.' : '.'}
            </span>
            <button
              type="button"
              disabled={busy}
              data-testid="retry-confirm"
              onClick={async () => {
                setConfirmingRetry(false);
                report(await runRetry({ input: { id: op.id, version: op.version } }), (state) =>
                  state === 'RECONCILE_ONLY'
                    ? 'Retried: live again with a fresh attempt budget, due now. A request may have reached the provider, so the worker reconciles before anything is resent.'
                    : 'Retried: live again with a fresh attempt budget, due now.',
                );
              }}
            >
              Retry now
            </button>
            <button type="button" className="link" onClick={() => setConfirmingRetry(false)}>
              Keep it dead
            </button>
          </div>
        ))}
      {live && (
        <>
          <button type="button" className="secondary" disabled={busy} onClick={async () => report(await runRequeue({ input: { id: op.id, version: op.version } }), 'Requeued: due now, deferral cleared.')}>
            Requeue now
          </button>
          {!cancelling ? (
            <button type="button" className="danger" disabled={busy} onClick={() => setCancelling(true)}>
              Cancel…
            </button>
          ) : (
            <form className="cancel-form" onSubmit={submitCancel}>
              <label>
                <span>Reason (recorded in its history)</span>
                <input name="reason" required maxLength={500} autoFocus placeholder="duplicate of …" />
              </label>
              <button type="submit" className="danger" disabled={busy}>
                Cancel the operation
              </button>
              <button type="button" className="link" onClick={() => setCancelling(false)}>
                Keep it
              </button>
            </form>
          )}
        </>
      )}
      {outcome !== null && (
        <p className={outcome.ok ? 'notice ok' : 'notice bad'} role="status" data-testid="action-outcome">
          {outcome.words}
        </p>
      )}
    </section>
  );
}
