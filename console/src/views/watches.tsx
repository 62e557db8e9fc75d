/**
 * Watches (verify/repair of provider documents) and sync states: lists with
 * their filters (forward keyset paging, as the API pages them), a detail
 * page each, and `requestRepull` on a watch.
 */
import { useMemo, useState, type FormEvent, type ReactNode } from 'react';
import { useMutation, useQuery } from 'urql';
import {
  ConsoleSyncStateDocument,
  ConsoleSyncStatesDocument,
  ConsoleWatchDocument,
  ConsoleWatchesDocument,
  RequestRepullDocument,
  VerificationStatus,
  type SyncStateFilter,
  type WatchFilter,
} from '../../../client/generated/graphql';
import { keepParams, Link, navigate, withParams, type Route } from '../router';
import { isValueOf, Badge, DID, Empty, ErrorState, Fields, JSONValue, Loading, mutationErrorWords, Time, useFoldLabels, total } from '../ui';

const PAGE_SIZE = 25;

/** A filter form over text fields; submitting navigates to `path` with them (first page). */
function TextFilters({ path, route, fields, extra }: { path: string; route: Route; fields: [name: string, label: string, placeholder: string][]; extra?: ReactNode }) {
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    // Every named field of the form (checkboxes give one value each), blanks left out.
    const next: Record<string, string[]> = {};
    for (const [name, value] of form) {
      const text = String(value).trim();
      if (text !== '') (next[name] ??= []).push(text);
    }
    navigate(withParams(path, next));
  };
  return (
    <form className="filters" onSubmit={submit} key={route.params.toString()} aria-label="Filters">
      {extra}
      <div className="inputs">
        {fields.map(([name, label, placeholder]) => (
          <label key={name}>
            <span>{label}</span>
            <input name={name} defaultValue={route.params.get(name) ?? ''} placeholder={placeholder} />
          </label>
        ))}
      </div>
      <div className="filter-actions">
        <button type="submit">Apply</button>
        {[...route.params.keys()].some((k) => k !== 'after') && (
          <button type="button" className="secondary" onClick={() => navigate(path)}>
            Clear filters
          </button>
        )}
      </div>
    </form>
  );
}

/** Forward-only paging: the next page by cursor, and back to the first. */
function ForwardPager({ path, route, endCursor, hasNextPage }: { path: string; route: Route; endCursor: string | null; hasNextPage: boolean }) {
  const keep = keepParams(route.params, 'after');
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" className="secondary" disabled={!route.params.has('after')} onClick={() => navigate(withParams(path, keep))}>
        ← First page
      </button>
      <button type="button" className="secondary" disabled={!hasNextPage || endCursor === null} onClick={() => navigate(withParams(path, { ...keep, after: endCursor ?? undefined }))}>
        Next →
      </button>
    </nav>
  );
}

export function Watches({ route }: { route: Route }) {
  const foldRef = useFoldLabels();
  const { params } = route;
  const filter = useMemo<WatchFilter>(() => {
    const f: WatchFilter = {};
    const statuses = params.getAll('status').filter((s): s is VerificationStatus => isValueOf(VerificationStatus, s));
    if (statuses.length > 0) f.statuses = statuses;
    if (params.get('connector')) f.connectorName = params.get('connector')!;
    if (params.get('owner')) f.ownerDID = params.get('owner')!;
    if (params.get('document')) f.documentID = params.get('document')!;
    return f;
  }, [params.toString()]); // eslint-disable-line react-hooks/exhaustive-deps
  const [{ data, fetching, error }, refetch] = useQuery({ query: ConsoleWatchesDocument, variables: { first: PAGE_SIZE, after: params.get('after'), filter } });
  const toggle = (status: string) => {
    const current = params.getAll('status');
    const next = keepParams(params, 'status', 'after');
    next.status = current.includes(status) ? current.filter((s) => s !== status) : [...current, status];
    navigate(withParams('/watches', next));
  };
  return (
    <div>
      <TextFilters
        path="/watches"
        route={route}
        fields={[
          ['connector', 'Connector', 'google'],
          ['owner', 'Owner DID', 'did:key:z6Mk…'],
          ['document', 'Document ID', 'demo-doc-…'],
        ]}
        extra={
          <fieldset className="chips">
            <legend>Status</legend>
            {Object.values(VerificationStatus).map((status) => (
              <label key={status} className="chip">
                <input type="checkbox" name="status" value={status} checked={params.getAll('status').includes(status)} onChange={() => toggle(status)} />
                <Badge value={status} />
              </label>
            ))}
          </fieldset>
        }
      />
      <div className="table-head">
        <h2>
          Watches <span className="muted">{data !== undefined ? total(data.watches.totalCount, data.watches.totalCountCapped, 'watch', 'watches') : ''}</span>
        </h2>
      </div>
      {error !== undefined && <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />}
      {data === undefined && fetching && <Loading what="watches" />}
      {data !== undefined &&
        (data.watches.edges.length === 0 ? (
          <Empty>No watch matches. Finalizing a write arms one; so does ingest (<code>armWatch</code>).</Empty>
        ) : (
          <div className="table-wrap">
            <table className="fold-narrow" data-testid="watches-table" ref={foldRef}>
              <thead>
                <tr>
                  <th>Document</th>
                  <th>Status</th>
                  <th>Connector</th>
                  <th className="wide-only">Model</th>
                  <th className="wide-only">Owner</th>
                  <th className="num">Generation</th>
                  <th className="num">Attempts</th>
                  <th>Next check</th>
                </tr>
              </thead>
              <tbody>
                {data.watches.edges.map(({ node: watch }) => (
                  <tr key={watch.id}>
                    <td>
                      <Link to={`/watches/${encodeURIComponent(watch.id)}`}>{watch.documentID}</Link>
                      <div className="sub muted">{watch.sourceID}</div>
                    </td>
                    <td>
                      <Badge value={watch.verificationStatus} />
                      {watch.deferReason !== null && (
                        <div className="sub">
                          deferred: <Badge value={watch.deferReason} />
                        </div>
                      )}
                    </td>
                    <td>{watch.connectorName}</td>
                    <td className="wide-only">{watch.model}</td>
                    <td className="wide-only">
                      <DID value={watch.ownerDID} />
                    </td>
                    <td className="num">{watch.repairGeneration}</td>
                    <td className="num">{watch.verificationAttempts}</td>
                    <td>
                      <Time compact value={watch.verificationStatus === 'PENDING_VERIFICATION' ? watch.nextAttemptAt : null} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      {data !== undefined && <ForwardPager path="/watches" route={route} endCursor={data.watches.pageInfo.endCursor} hasNextPage={data.watches.pageInfo.hasNextPage} />}
    </div>
  );
}

export function WatchDetail({ id }: { id: string }) {
  const [{ data, fetching, error }, refetch] = useQuery({ query: ConsoleWatchDocument, variables: { id } });
  const [repull, runRepull] = useMutation(RequestRepullDocument);
  const [outcome, setOutcome] = useState<{ ok: boolean; words: string } | null>(null);
  if (data === undefined && fetching) return <Loading what="the watch" />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  const watch = data?.node?.__typename === 'ProjectionWatch' ? data.node : null;
  if (watch === null || watch === undefined)
    return (
      <Empty>
        No such watch, or not one you may see. <Link to="/watches">Back to watches</Link>
      </Empty>
    );
  const requestRepull = async () => {
    const answer = await runRepull({ input: { id: watch.id } });
    const payload = answer.data?.requestRepull;
    if (answer.error !== undefined) setOutcome({ ok: false, words: answer.error.message });
    else if (payload?.__typename === 'WatchPayload') setOutcome({ ok: true, words: `Repull requested: generation ${payload.watch.repairGeneration}, pending verification, due now.` });
    else if (payload !== undefined) setOutcome({ ok: false, words: mutationErrorWords(payload) });
    refetch({ requestPolicy: 'network-only' });
  };
  return (
    <div className="detail">
      <p className="crumbs">
        <Link to="/watches">Watches</Link> / <span>{watch.documentID}</span>
      </p>
      <header className="detail-head">
        <h2>
          {watch.documentID} <Badge value={watch.verificationStatus} />
        </h2>
        <p className="muted">
          {watch.model} {watch.sourceID} on {watch.connectorName} ({watch.accountKey}), version {watch.version}
        </p>
      </header>
      <section className="actions" aria-label="Actions">
        <button type="button" disabled={repull.fetching} onClick={requestRepull} data-testid="request-repull">
          Request repull
        </button>
        <span className="muted">Opens a new verification generation, due now; the next sweep tick picks it up.</span>
        {outcome !== null && (
          <p className={outcome.ok ? 'notice ok' : 'notice bad'} role="status">
            {outcome.words}
          </p>
        )}
      </section>
      <section className="panel panel-wide">
        <Fields
          rows={[
            ['Status', <Badge value={watch.verificationStatus} />],
            ['Verification attempts', watch.verificationAttempts],
            ['Repair generation', watch.repairGeneration],
            ['Next check', <Time value={watch.nextAttemptAt} />],
            ['Claimed until', <Time value={watch.claimedUntil} empty="not claimed" />],
            ['Deferred for', <Badge value={watch.deferReason} />],
            ['Verified digest', watch.verifiedStateDigest && <code className="wrap">{watch.verifiedStateDigest}</code>],
            ['Observed winner digest', watch.observedWinnerDigest && <code className="wrap">{watch.observedWinnerDigest}</code>],
            ['Document', <Link to={withParams('/operations', { document: watch.documentID })}>{watch.documentID} (its operations)</Link>],
            ['Owner', <DID value={watch.ownerDID} />],
            ['Connector', watch.connectorName],
            ['Model', watch.model],
            ['Account', watch.accountKey],
            ['Source ID', <code>{watch.sourceID}</code>],
            ['Version', watch.version],
            ['Created', <Time value={watch.createdAt} />],
            ['Updated', <Time value={watch.updatedAt} />],
          ]}
        />
      </section>
    </div>
  );
}

const STALE_CHOICES: [string, string][] = [
  ['', 'any'],
  [String(15 * 60_000), 'no progress for 15 min'],
  [String(3_600_000), 'no progress for 1 h'],
  [String(86_400_000), 'no progress for 1 day'],
];

export function SyncStates({ route }: { route: Route }) {
  const foldRef = useFoldLabels();
  const { params } = route;
  const filter = useMemo<SyncStateFilter>(() => {
    const f: SyncStateFilter = {};
    if (params.get('connector')) f.connectorName = params.get('connector')!;
    if (params.get('owner')) f.ownerDID = params.get('owner')!;
    if (params.get('status')) f.status = params.get('status')!;
    const stale = Number(params.get('staleForMs'));
    if (Number.isInteger(stale) && stale >= 1000) f.staleForMs = stale;
    return f;
  }, [params.toString()]); // eslint-disable-line react-hooks/exhaustive-deps
  const [{ data, fetching, error }, refetch] = useQuery({ query: ConsoleSyncStatesDocument, variables: { first: PAGE_SIZE, after: params.get('after'), filter } });
  return (
    <div>
      <TextFilters
        path="/sync-states"
        route={route}
        fields={[
          ['connector', 'Connector', 'google'],
          ['owner', 'Owner DID', 'did:key:z6Mk…'],
          ['status', 'Status', 'idle'],
        ]}
        extra={
          <label className="inline">
            <span>Stale</span>
            <select name="staleForMs" defaultValue={params.get('staleForMs') ?? ''}>
              {STALE_CHOICES.map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
        }
      />
      <div className="table-head">
        <h2>
          Sync states <span className="muted">{data !== undefined ? total(data.syncStates.totalCount, data.syncStates.totalCountCapped, 'sync state') : ''}</span>
        </h2>
      </div>
      {error !== undefined && <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />}
      {data === undefined && fetching && <Loading what="sync states" />}
      {data !== undefined &&
        (data.syncStates.edges.length === 0 ? (
          <Empty>No sync state matches. Connectors write one per owner as they sync (<code>setSyncState</code>).</Empty>
        ) : (
          <div className="table-wrap">
            <table className="fold-narrow" data-testid="sync-states-table" ref={foldRef}>
              <thead>
                <tr>
                  <th>Connector</th>
                  <th>Status</th>
                  <th className="wide-only">Owner</th>
                  <th className="num">Entities</th>
                  <th>Last synced</th>
                  <th>Progressed</th>
                  <th>Error</th>
                </tr>
              </thead>
              <tbody>
                {data.syncStates.edges.map(({ node: state }) => (
                  <tr key={state.id}>
                    <td>
                      <Link to={`/sync-states/${encodeURIComponent(state.id)}`}>{state.connectorName}</Link>
                    </td>
                    <td>
                      <Badge value={state.status} />
                    </td>
                    <td className="wide-only">
                      <DID value={state.ownerDID} />
                    </td>
                    <td className="num">{state.entityCount.toLocaleString()}</td>
                    <td>{Number.isNaN(Date.parse(state.lastSyncedAt)) ? state.lastSyncedAt : <Time compact value={state.lastSyncedAt} />}</td>
                    <td>
                      <Time value={state.progressedAt} />
                    </td>
                    <td className="message">{state.error ?? <span className="muted">—</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      {data !== undefined && <ForwardPager path="/sync-states" route={route} endCursor={data.syncStates.pageInfo.endCursor} hasNextPage={data.syncStates.pageInfo.hasNextPage} />}
    </div>
  );
}

export function SyncStateDetail({ id }: { id: string }) {
  const [{ data, fetching, error }, refetch] = useQuery({ query: ConsoleSyncStateDocument, variables: { id } });
  if (data === undefined && fetching) return <Loading what="the sync state" />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  const state = data?.node?.__typename === 'SyncState' ? data.node : null;
  if (state === null || state === undefined)
    return (
      <Empty>
        No such sync state, or not one you may see. <Link to="/sync-states">Back to sync states</Link>
      </Empty>
    );
  return (
    <div className="detail">
      <p className="crumbs">
        <Link to="/sync-states">Sync states</Link> / <span>{state.connectorName}</span>
      </p>
      <header className="detail-head">
        <h2>
          {state.connectorName} <Badge value={state.status} />
        </h2>
        <p className="muted">version {state.version}</p>
      </header>
      <section className="panel panel-wide">
        <Fields
          rows={[
            ['Status', <Badge value={state.status} />],
            ['Owner', <DID value={state.ownerDID} />],
            ['Entities', state.entityCount.toLocaleString()],
            ['Last synced (connector’s own words)', state.lastSyncedAt],
            ['Progressed (store clock)', <Time value={state.progressedAt} />],
            ['Error', state.error],
            ['Checkpoint', <JSONValue value={state.checkpoint} />],
            ['Recovery', <JSONValue value={state.recovery} />],
            ['Version', state.version],
            ['Incarnation', state.incarnation && <code>{state.incarnation}</code>],
          ]}
        />
      </section>
    </div>
  );
}
