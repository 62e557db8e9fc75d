/**
 * The overview: operations by state (every state), outcomes and the due
 * backlog over time (activity-charts.tsx), by last outcome and by connector,
 * deferred work, what nobody is moving (stuck) and what is due now.
 * Live: every committed operation change re-reads the counts (at most twice
 * a second), so the numbers move as workers work; "due now" is asked again
 * with each read and every 30 s.
 */
import { useEffect, useState } from 'react';
import { useQuery } from 'urql';
import { ConsoleOverviewDocument } from '../../../client/generated/graphql';
import { Link, withParams } from '../router';
import { Badge, DID, Empty, ErrorState, Loading, Time } from '../ui';
import { useLiveRefetch } from '../live';
import { ActivityCharts } from './activity-charts';

const STATE_HINTS: Record<string, string> = {
  ATTEMPTED: 'live: may be sent',
  RECONCILE_ONLY: 'live: may have reached the provider; reconcile before resending',
  COMMITTED: 'landed',
  DEAD: 'given up',
};

export function Overview() {
  // "Due now" as of each read: a change, or half a minute passing, reads the counts again with a new instant.
  const [dueBefore, setDueBefore] = useState(() => new Date().toISOString());
  const [result, refetch] = useQuery({ query: ConsoleOverviewDocument, variables: { dueBefore }, requestPolicy: 'cache-and-network' });
  useLiveRefetch(() => setDueBefore(new Date().toISOString()));
  useEffect(() => {
    const timer = setInterval(() => setDueBefore(new Date().toISOString()), 30_000);
    return () => clearInterval(timer);
  }, []);
  const { data, fetching, error } = result;

  if (data === undefined && fetching) return <Loading what="the overview" />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  if (data === undefined) return null;

  const totalOps = data.byState.reduce((sum, row) => sum + row.count, 0);
  const connectors = new Map<string, Map<string, number>>();
  for (const row of data.byConnector) {
    const name = row.connectorName ?? '—';
    const byState = connectors.get(name) ?? new Map<string, number>();
    byState.set(row.state ?? '', row.count);
    connectors.set(name, byState);
  }
  // The server's order of states (live first), as the cards show them.
  const states = data.byState.flatMap((row) => (row.state === null ? [] : [row.state]));
  const lastKinds = data.byLastKind.filter((row) => row.lastKind !== null);
  const deferred = data.deferred.filter((row) => row.deferReason !== null);
  const stuck = data.stuck[0];
  const due = data.due[0];

  return (
    <div className="overview">
      {error !== undefined && <ErrorState error={error} />}
      <section className="cards" aria-label="Operations by state" data-testid="counts-by-state">
        {data.byState.map((row) => (
          <Link key={row.state} to={withParams('/operations', { state: row.state ?? undefined })} className={`card card-${(row.state ?? '').toLowerCase()}`} data-state={row.state}>
            <span className="card-count">{row.count.toLocaleString()}</span>
            <span className="card-label">
              <Badge value={row.state} />
            </span>
            <span className="card-hint">{STATE_HINTS[row.state ?? ''] ?? ''}</span>
          </Link>
        ))}
        <Link to={withParams('/operations', { stuck: 'true' })} className={`card card-stuck ${stuck !== undefined && stuck.count > 0 ? 'card-alert' : ''}`} data-testid="stuck-count">
          <span className="card-count">
            {stuck?.count.toLocaleString() ?? 0}
            {stuck?.capped ? '+' : ''}
          </span>
          <span className="card-label">stuck</span>
          <span className="card-hint">live, lease lapsed or due 15+ min, nobody moving it</span>
        </Link>
        <Link to={withParams('/operations', { dueBefore })} className="card card-due" data-testid="due-count">
          <span className="card-count">
            {due?.count.toLocaleString() ?? 0}
            {due?.capped ? '+' : ''}
          </span>
          <span className="card-label">due now</span>
          <span className="card-hint">live and due: what workers can claim</span>
        </Link>
      </section>

      <ActivityCharts />

      {totalOps === 0 ? (
        <Empty>
          No operations yet. Write-back clients create them with <code>claimOperation</code>; <code>npm start -- --demo</code> fills a database with demo data.
        </Empty>
      ) : (
        <div className="panels">
          <section className="panel" aria-labelledby="by-connector">
            <h2 id="by-connector">By connector</h2>
            <div className="table-wrap">
              <table data-testid="counts-by-connector" className="fold-narrow">
                <thead>
                  <tr>
                    <th>Connector</th>
                    {states.map((state) => (
                      <th key={state} className="num">
                        {state.replace(/_/g, ' ').toLowerCase()}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {[...connectors].map(([name, byState]) => (
                    <tr key={name}>
                      <td className="fold-title">
                        <Link to={withParams('/operations', { connector: name })}>{name}</Link>
                      </td>
                      {states.map((state) => (
                        <td key={state} className="num" data-label={state.replace(/_/g, ' ').toLowerCase()}>
                          {byState.get(state) ? <Link to={withParams('/operations', { connector: name, state })}>{byState.get(state)}</Link> : <span className="muted">0</span>}
                        </td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>

          <section className="panel" aria-labelledby="by-last-kind">
            <h2 id="by-last-kind">By last outcome</h2>
            {lastKinds.length === 0 ? (
              <Empty>No attempt has ended yet.</Empty>
            ) : (
              <ul className="bars" data-testid="counts-by-last-kind">
                {lastKinds.map((row) => (
                  <li key={row.lastKind}>
                    <Link to={withParams('/operations', { lastKind: row.lastKind ?? undefined })}>
                      <Badge value={row.lastKind} />
                    </Link>
                    <span className="bar" style={{ width: `${Math.max(4, (row.count / Math.max(...lastKinds.map((r) => r.count))) * 100)}%` }} />
                    <span className="num">{row.count}</span>
                  </li>
                ))}
              </ul>
            )}
            <h3>Deferred (not spending attempts)</h3>
            {deferred.length === 0 ? (
              <p className="muted">Nothing waits for a device to come online or an owner to authorize.</p>
            ) : (
              <ul className="plain">
                {deferred.map((row) => (
                  <li key={row.deferReason}>
                    <Link to={withParams('/operations', { deferReason: row.deferReason ?? undefined })}>
                      {row.count} waiting for {row.deferReason === 'OFFLINE' ? 'the device to come online' : 'the owner to authorize'}
                    </Link>
                  </li>
                ))}
              </ul>
            )}
          </section>

          <section className="panel panel-wide" aria-labelledby="stuck-work">
            <h2 id="stuck-work">Stuck work</h2>
            {data.stuckOperations.edges.length === 0 ? (
              <Empty>Nothing is stuck: every live operation has a worker on it or is not yet due.</Empty>
            ) : (
              <div className="table-wrap">
                <table className="fold-narrow">
                  <thead>
                    <tr>
                      <th>Operation</th>
                      <th>Connector</th>
                      <th className="wide-only">Owner</th>
                      <th>State</th>
                      <th className="num">Attempts</th>
                      <th>Last outcome</th>
                      <th>Due</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.stuckOperations.edges.map(({ node }) => (
                      <tr key={node.id}>
                        <td className="fold-title">
                          <Link to={`/operations/${encodeURIComponent(node.id)}`}>{node.operationID}</Link>
                        </td>
                        <td data-label="connector">{node.connectorName}</td>
                        <td className="wide-only" data-label="owner">
                          <DID value={node.ownerDID} />
                        </td>
                        <td data-label="state">
                          <Badge value={node.state} />
                        </td>
                        <td className="num" data-label="attempts">
                          {node.attempts}
                        </td>
                        <td data-label="last outcome">
                          <Badge value={node.lastKind} /> {node.lastHTTPStatus ?? ''}
                        </td>
                        <td data-label="due">
                          <Time value={node.nextAttemptAt} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
            <p>
              <Link to={withParams('/operations', { stuck: 'true' })}>All stuck operations →</Link>
            </p>
          </section>
        </div>
      )}
    </div>
  );
}
