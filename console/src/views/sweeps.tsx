/**
 * Sweeps per partition: each listing pass (receipt) with its candidates'
 * counts by state and its partition's checkpoint; in progress (uncommitted)
 * by default. A receipt opens on its own page with its candidates (state,
 * attempts, apply failures, last error), paged, filtered by state. Live: a
 * change of a receipt or one of its candidates re-reads.
 */
import { useMemo } from 'react';
import { useQuery, useSubscription } from 'urql';
import { ConsoleSweepDocument, ConsoleSweepsDocument, SweepCandidateState, SweepProgressDocument, type SweepReceiptFilter } from '../../../client/generated/graphql';
import { useStoreChanges, useThrottle } from '../live';
import { keepParams, Link, navigate, withParams, type Route } from '../router';
import { Badge, DID, Empty, ErrorState, Fields, isValueOf, JSONValue, Loading, Time, useFoldLabels, total } from '../ui';

/** Candidates per page of a receipt's page. */
const CANDIDATES_PER_PAGE = 50;

export function Sweeps({ route }: { route: Route }) {
  const foldRef = useFoldLabels();
  const { params } = route;
  const scope = params.get('show') ?? 'open';
  const filter = useMemo<SweepReceiptFilter>(() => {
    const f: SweepReceiptFilter = {};
    if (scope === 'open') f.committed = false;
    if (scope === 'committed') f.committed = true;
    if (params.get('connector')) f.connectorName = params.get('connector')!;
    if (params.get('partition')) f.partition = params.get('partition')!;
    return f;
  }, [params.toString()]); // eslint-disable-line react-hooks/exhaustive-deps
  const [{ data, fetching, error }, refetch] = useQuery({ query: ConsoleSweepsDocument, variables: { first: 50, after: params.get('after'), filter } });
  const reread = useThrottle(() => refetch({ requestPolicy: 'network-only' }), 500);
  useSubscription({ query: SweepProgressDocument, variables: { filter: {} } }, (_previous, event) => {
    reread();
    return event;
  });
  // Retention deleted settled candidates (counts change), or a migration ran.
  useStoreChanges(['SWEEP_RECEIPTS'], reread);
  const show = (value: string) => navigate(withParams('/sweeps', { show: value === 'open' ? undefined : value, connector: params.get('connector'), partition: params.get('partition') }));

  return (
    <div>
      <div className="filters">
        <fieldset className="chips">
          <legend>Show</legend>
          {[
            ['open', 'in progress'],
            ['committed', 'committed'],
            ['all', 'all'],
          ].map(([value, label]) => (
            <label key={value} className="chip">
              <input type="radio" name="show" checked={scope === value} onChange={() => show(value!)} />
              {label}
            </label>
          ))}
        </fieldset>
      </div>
      <div className="table-head">
        <h2>
          Sweeps <span className="muted">{data !== undefined ? total(data.sweepReceipts.totalCount, data.sweepReceipts.totalCountCapped, 'pass', 'passes') : ''}</span>
        </h2>
      </div>
      {error !== undefined && <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />}
      {data === undefined && fetching && <Loading what="sweeps" />}
      {data !== undefined &&
        (data.sweepReceipts.edges.length === 0 ? (
          <Empty>{scope === 'open' ? 'No sweep in progress.' : 'No sweep recorded.'} Workers record one per listing pass of a partition (<code>recordSweepReceipt</code>).</Empty>
        ) : (
          <div className="table-wrap">
            <table className="fold-narrow" data-testid="sweeps-table" ref={foldRef}>
              <thead>
                <tr>
                  <th>Partition</th>
                  <th>Connector</th>
                  <th className="wide-only">Owner</th>
                  <th className="num">Pass</th>
                  {Object.values(SweepCandidateState).map((state) => (
                    <th key={state} className="num">
                      {state.toLowerCase()}
                    </th>
                  ))}
                  <th className="num">Checkpoint</th>
                  <th>Recorded</th>
                  <th>Committed</th>
                </tr>
              </thead>
              <tbody>
                {data.sweepReceipts.edges.map(({ node: receipt }) => {
                  const counts = new Map(receipt.candidateCounts.map((c) => [c.state, c.count]));
                  return (
                    <tr key={receipt.id}>
                      <td>
                        <Link to={`/sweeps/${encodeURIComponent(receipt.id)}`}>
                          <code>{receipt.partition}</code>
                        </Link>
                        <div className="sub muted">
                          {receipt.modelID} · {receipt.kind}
                          {receipt.complete ? '' : ' · partial listing'}
                        </div>
                      </td>
                      <td>{receipt.connectorName}</td>
                      <td className="wide-only">
                        <DID value={receipt.ownerDID} />
                      </td>
                      <td className="num">{receipt.sequence}</td>
                      {Object.values(SweepCandidateState).map((state) => (
                        <td key={state} className={`num ${state === 'FAILED' && (counts.get(state) ?? 0) > 0 ? 'alert' : ''}`}>
                          {counts.get(state) ?? 0}
                        </td>
                      ))}
                      <td className="num">{receipt.checkpoint?.receiptSequence ?? <span className="muted">none</span>}</td>
                      <td>
                        <Time value={receipt.createdAt} />
                      </td>
                      <td>{receipt.committedAt === null ? <Badge value="IN_PROGRESS" /> : <Time value={receipt.committedAt} />}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        ))}
    </div>
  );
}

/** One listing pass: its fields, its partition's checkpoint and its candidates, a page at a time, by document id. */
export function SweepDetail({ id, route }: { id: string; route: Route }) {
  const foldRef = useFoldLabels();
  const { params } = route;
  const states = params.getAll('state').filter((state): state is SweepCandidateState => isValueOf(SweepCandidateState, state));
  const after = params.get('after');
  const [{ data, fetching, error }, refetch] = useQuery({
    query: ConsoleSweepDocument,
    variables: { id, first: CANDIDATES_PER_PAGE, after, states: states.length > 0 ? states : null },
  });
  const reread = useThrottle(() => refetch({ requestPolicy: 'network-only' }), 500);
  useSubscription({ query: SweepProgressDocument, variables: { filter: {} } }, (_previous, event) => {
    reread();
    return event;
  });
  // Retention deleted settled candidates (counts change), or a migration ran.
  useStoreChanges(['SWEEP_RECEIPTS'], reread);
  if (data === undefined && fetching) return <Loading what="the sweep" />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  const receipt = data?.node?.__typename === 'SweepReceipt' ? data.node : null;
  if (receipt === null || receipt === undefined)
    return (
      <Empty>
        No such sweep, or not one you may see. <Link to="/sweeps">Back to sweeps</Link>
      </Empty>
    );
  const path = `/sweeps/${encodeURIComponent(id)}`;
  const toggle = (state: SweepCandidateState) => {
    const next = states.includes(state) ? states.filter((s) => s !== state) : [...states, state];
    navigate(withParams(path, { ...keepParams(params, 'after', 'state'), state: next }));
  };
  const counts = new Map(receipt.candidateCounts.map((c) => [c.state, c.count]));
  const candidates = receipt.candidates.edges.map((edge) => edge.node);
  const info = receipt.candidates.pageInfo;

  return (
    <div className="detail" data-testid="sweep-detail">
      <p className="crumbs">
        <Link to="/sweeps">Sweeps</Link> / <code>{receipt.partition}</code> / pass {receipt.sequence}
      </p>
      <header className="detail-head">
        <h2>
          <code>{receipt.partition}</code> {receipt.committedAt === null ? <Badge value="IN_PROGRESS" /> : <Badge value="COMMITTED" />}
        </h2>
        <p className="muted">
          pass {receipt.sequence} of {receipt.connectorName} ({receipt.modelID}, {receipt.kind}
          {receipt.complete ? '' : ', partial listing'}) for <DID value={receipt.ownerDID} />
        </p>
      </header>
      {error !== undefined && <ErrorState error={error} />}
      <div className="panels">
        <section className="panel" aria-labelledby="sweep-fields">
          <h3 id="sweep-fields">Pass</h3>
          <Fields
            rows={[
              ['Recorded', <Time value={receipt.createdAt} />],
              ['Committed', receipt.committedAt === null ? 'not yet: candidates are being applied' : <Time value={receipt.committedAt} />],
              ['Provenance', <code>{receipt.provenance}</code>],
              ['Source fetch HLC', <code>{receipt.sourceFetchHLC}</code>],
              ['Scope', <JSONValue value={receipt.scope} />],
              ['Kept', <JSONValue value={receipt.keep} />],
              ['Predicate', receipt.predicate == null ? null : <JSONValue value={receipt.predicate} />],
              ['ID', <code className="wrap">{receipt.id}</code>],
            ]}
          />
        </section>
        <section className="panel" aria-labelledby="sweep-checkpoint">
          <h3 id="sweep-checkpoint">Partition checkpoint</h3>
          {receipt.checkpoint === null ? (
            <p className="muted">None yet: committing a pass advances it.</p>
          ) : (
            <Fields
              rows={[
                ['Pass', receipt.checkpoint.receiptSequence],
                ['Updated', <Time value={receipt.checkpoint.updatedAt} />],
              ]}
            />
          )}
        </section>
      </div>

      <section className="panel panel-wide" aria-labelledby="sweep-candidates">
        <h3 id="sweep-candidates">
          Candidates <span className="muted">(documents this pass did not keep, by document id)</span>
        </h3>
        <fieldset className="chips">
          <legend>State</legend>
          {Object.values(SweepCandidateState).map((state) => (
            <label key={state} className="chip">
              <input type="checkbox" name="state" value={state} checked={states.includes(state)} onChange={() => toggle(state)} />
              <Badge value={state} /> <span className="muted">{counts.get(state) ?? 0}</span>
            </label>
          ))}
        </fieldset>
        {candidates.length === 0 ? (
          <Empty>{states.length > 0 ? 'No candidate in these states.' : 'This pass listed no candidate.'}</Empty>
        ) : (
          <div className="table-wrap">
            <table className="fold-narrow" data-testid="candidates-table" ref={foldRef}>
              <thead>
                <tr>
                  <th>Document</th>
                  <th>State</th>
                  <th className="num">Attempts</th>
                  <th className="num">Apply failures</th>
                  <th>Last error</th>
                  <th>Next attempt</th>
                  <th className="wide-only">Updated</th>
                </tr>
              </thead>
              <tbody>
                {candidates.map((candidate) => (
                  <tr key={candidate.documentID} data-document-id={candidate.documentID}>
                    <td>
                      <Link to={`/search?q=${encodeURIComponent(candidate.documentID)}`}>
                        <code>{candidate.documentID}</code>
                      </Link>
                      <div className="sub muted">
                        {candidate.modelID} · <code>{candidate.sourceID}</code>
                      </div>
                    </td>
                    <td>
                      <Badge value={candidate.state} />
                    </td>
                    <td className="num">{candidate.attempts}</td>
                    <td className={`num ${candidate.applyFailures > 0 ? 'alert' : ''}`}>{candidate.applyFailures}</td>
                    <td className="message">{candidate.lastError ?? <span className="muted">—</span>}</td>
                    <td>
                      <Time value={candidate.state === 'PENDING' ? candidate.nextAttemptAt : null} />
                    </td>
                    <td className="wide-only">
                      <Time value={candidate.updatedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {(after !== null || info.hasNextPage) && (
          <nav className="pager" aria-label="Pages">
            {after !== null && (
              <button type="button" className="link" onClick={() => navigate(withParams(path, keepParams(params, 'after')))}>
                First page
              </button>
            )}
            <button type="button" className="secondary" disabled={!info.hasNextPage} onClick={() => info.endCursor && navigate(withParams(path, { ...keepParams(params, 'after'), after: info.endCursor }))}>
              Next →
            </button>
          </nav>
        )}
      </section>
    </div>
  );
}
