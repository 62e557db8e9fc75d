/**
 * One operation: every readable field (the API has no field for a lease
 * token or send marker, so none can show), its attempt history with errors,
 * its watch, its document's connector state, and the operator actions
 * (retry, cancel with a reason, requeue) for a viewer who may use them: a
 * service principal or the operation's owner. Each action sends the version
 * this page shows (a CAS); a typed refusal is said in words. Live: each
 * committed change of the operation re-reads the page.
 */
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import {
  CancelOperationDocument,
  ConsoleDocumentDocument,
  ConsoleOperationChangedDocument,
  ConsoleOperationDetailDocument,
  RequeueOperationDocument,
  RetryOperationDocument,
  type ConnectorOperationFieldsFragment,
} from '../../../client/generated/graphql';
import { useThrottle } from '../live';
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

      <Actions op={op} mayAct={mayAct} onDone={() => refetch({ requestPolicy: 'network-only' })} />

      {op.lastError !== null && (
        <div className="last-error" role="note">
          <strong>Last error</strong>
          <pre>{op.lastError}</pre>
        </div>
      )}

      <div className="panels">
        <section className="panel" aria-labelledby="op-fields">
          <h3 id="op-fields">Fields</h3>
          <Fields
            rows={[
              ['State', <Badge value={op.state} />],
              ['Attempts', op.attempts],
              ['Next attempt', <Time value={op.nextAttemptAt} />],
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
          History <span className="muted">({history.totalCount}, newest first)</span>
        </h3>
        {history.edges.length === 0 ? (
          <Empty>No attempt yet.</Empty>
        ) : (
          <div className="table-wrap">
            <table data-testid="attempt-history">
              <thead>
                <tr>
                  <th className="num">#</th>
                  <th>What</th>
                  <th>Started</th>
                  <th className="wide-only">Sent</th>
                  <th>Ended</th>
                  <th>Outcome</th>
                  <th>Message</th>
                </tr>
              </thead>
              <tbody>
                {history.edges.map(({ node: attempt }) => (
                  <tr key={attempt.seq}>
                    <td className="num">{attempt.attempt}</td>
                    <td>
                      {attempt.kind === 'ATTEMPT' ? 'attempt' : <Badge value={attempt.kind} />}
                      {attempt.actorDID !== null && (
                        <div className="sub">
                          by <DID value={attempt.actorDID} />
                        </div>
                      )}
                    </td>
                    <td>
                      <Time value={attempt.startedAt} />
                    </td>
                    <td className="wide-only">
                      <Time value={attempt.sentAt} empty="not sent" />
                    </td>
                    <td>
                      <Time value={attempt.endedAt} empty="open" />
                    </td>
                    <td>
                      {attempt.committed ? <Badge value="COMMITTED" /> : <Badge value={attempt.outcome} />}
                      {attempt.httpStatus !== null && <span className="muted"> HTTP {attempt.httpStatus}</span>}
                      {attempt.retryAfterMs !== null && <div className="sub muted">retry after {Math.round(attempt.retryAfterMs / 1000)} s</div>}
                      {attempt.deferReason !== null && (
                        <div className="sub">
                          deferred: <Badge value={attempt.deferReason} />
                        </div>
                      )}
                    </td>
                    <td className="message">{attempt.message ?? <span className="muted">—</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
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
      {op.state === 'DEAD' && (
        <button type="button" disabled={busy} data-testid="retry" onClick={async () => report(await runRetry({ input: { id: op.id, version: op.version } }), (state) =>
                state === 'RECONCILE_ONLY'
                  ? 'Retried: live again with a fresh attempt budget, due now. A request may have reached the provider, so the worker reconciles before anything is resent.'
                  : 'Retried: live again with a fresh attempt budget, due now.',
              )}>
          Retry
        </button>
      )}
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
