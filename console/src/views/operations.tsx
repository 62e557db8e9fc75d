/**
 * The operations table: every filter of `operations` (kept in the query
 * string), keyset paging both ways (newer / older, by cursor), and live
 * rows. A change of a row on the page updates it in place; an operation not
 * on the page that the filter matches is announced in a bar at the top of
 * the table ("2 new or changed operations: show") instead of pushing the
 * rows down while someone reads them.
 */
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { useQuery } from 'urql';
import {
  ConnectorOperationState,
  ConsoleOperationsDocument,
  DeferReason,
  OperationOutcomeKind,
  type ConsoleOperationRowFragment,
  type OperationFilter,
} from '../../../client/generated/graphql';
import { useOperationChanges, useStoreChanges, useThrottle } from '../live';
import { BulkActions } from './bulk-actions';
import { keepParams, Link, navigate, withParams, type Route } from '../router';
import { isValueOf, Badge, DID, Empty, ErrorState, Loading, Time, useFoldLabels, total } from '../ui';

/** Rows per page: `size` in the query string (5 to 100), default 25. */
function pageSize(value: string | null): number {
  const size = Number(value);
  return Number.isInteger(size) && size >= 1 && size <= 100 ? size : 25;
}
const TEXT_FILTERS = [
  ['connector', 'Connector', 'google'],
  ['owner', 'Owner DID', 'did:key:z6Mk…'],
  ['document', 'Document ID', 'demo-doc-…'],
  ['model', 'Model', 'calendar.event'],
  ['minAttempts', 'Attempts at least', '3'],
] as const;
const TIME_FILTERS = [
  ['createdAfter', 'Created after'],
  ['createdBefore', 'Created before'],
  ['updatedAfter', 'Updated after'],
  ['updatedBefore', 'Updated before'],
  ['dueBefore', 'Due before'],
] as const;

/** The `OperationFilter` the query string describes. */
export function filterFromParams(params: URLSearchParams): OperationFilter {
  const filter: OperationFilter = {};
  const states = params.getAll('state').filter((s): s is ConnectorOperationState => isValueOf(ConnectorOperationState, s));
  if (states.length > 0) filter.states = states;
  const lastKinds = params.getAll('lastKind').filter((s): s is OperationOutcomeKind => isValueOf(OperationOutcomeKind, s));
  if (lastKinds.length > 0) filter.lastKinds = lastKinds;
  const deferReasons = params.getAll('deferReason').filter((s): s is DeferReason => isValueOf(DeferReason, s));
  if (deferReasons.length > 0) filter.deferReasons = deferReasons;
  const text = (name: string) => params.get(name)?.trim() || undefined;
  if (text('connector')) filter.connectorName = text('connector')!;
  if (text('owner')) filter.ownerDID = text('owner')!;
  if (text('document')) filter.documentID = text('document')!;
  if (text('model')) filter.model = text('model')!;
  const minAttempts = Number(text('minAttempts'));
  if (Number.isInteger(minAttempts) && minAttempts > 0) filter.minAttempts = minAttempts;
  if (params.get('stuck') === 'true') filter.stuck = true;
  if (params.get('stuck') === 'false') filter.stuck = false;
  for (const [name] of TIME_FILTERS) {
    const value = text(name);
    if (value !== undefined && !Number.isNaN(Date.parse(value))) filter[name] = new Date(value).toISOString();
  }
  return filter;
}

/** An ISO instant as a `datetime-local` value (local time, minutes). */
function toLocalInput(iso: string | null): string {
  if (iso === null || Number.isNaN(Date.parse(iso))) return '';
  const date = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** An operation as a table names it: its idempotency key (linking to its page), what it does and its document. */
export function OperationName({ op }: { op: Pick<ConsoleOperationRowFragment, 'id' | 'operationID' | 'op' | 'documentID'> }) {
  return (
    <>
      <Link to={`/operations/${encodeURIComponent(op.id)}`}>{op.operationID}</Link>
      <div className="sub muted">
        {op.op.toLowerCase()}
        {op.documentID !== null ? ` · ${op.documentID}` : ''}
      </div>
    </>
  );
}

export function Operations({ route }: { route: Route }) {
  const foldRef = useFoldLabels();
  const { params } = route;
  const filter = useMemo(() => filterFromParams(params), [params.toString()]); // eslint-disable-line react-hooks/exhaustive-deps
  const after = params.get('after');
  const before = params.get('before');
  const size = pageSize(params.get('size'));
  const variables = useMemo(() => (before !== null ? { last: size, before, filter } : { first: size, after, filter }), [filter, after, before, size]);
  const [result, refetch] = useQuery({ query: ConsoleOperationsDocument, variables });
  const { data, fetching, error } = result;

  // Live: rows changed in place, and operations the page does not show yet.
  const [changed, setChanged] = useState<ReadonlyMap<string, ConsoleOperationRowFragment>>(new Map());
  const [arrived, setArrived] = useState<ReadonlyMap<string, ConsoleOperationRowFragment>>(new Map());
  useEffect(() => {
    setChanged(new Map());
    setArrived(new Map());
  }, [variables, data]);
  // Rows ticked for a bulk action (bulk-actions.tsx); a new filter or page starts with none.
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  useEffect(() => setSelected(new Set()), [variables]);
  const onPage = useMemo(() => new Set(data?.operations.edges.map((edge) => edge.node.id)), [data]);
  const firstPage = after === null && before === null;
  const filtered = Object.keys(filter).length > 0;
  // One subscription, unfiltered, whatever the filter: a row on the page may change so that the filter no longer
  // matches it, and every tab shares it (the hub runs one per browser). An operation the page does not show yet is
  // listed as arrived when there is no filter; with one, the server decides whether it matches: the page re-reads.
  const reread = useThrottle(() => refetch({ requestPolicy: 'network-only' }), 1_000);
  useOperationChanges((operation) => {
    if (onPage.has(operation.id)) setChanged((map) => new Map(map).set(operation.id, operation));
    else if (firstPage && !filtered) setArrived((map) => new Map(map).set(operation.id, operation));
    else if (firstPage) reread();
  });
  // Retention (or a migration) removed or rewrote operations: any page may have lost rows.
  useStoreChanges(['OPERATIONS'], reread);

  const go = (next: Record<string, string | readonly string[] | undefined>) => {
    // A new filter starts again at the newest page.
    const merged = keepParams(params, 'after', 'before');
    for (const [name, value] of Object.entries(next)) {
      if (value === undefined) delete merged[name];
      else merged[name] = typeof value === 'string' ? [value] : [...value];
    }
    navigate(withParams('/operations', merged));
  };
  const toggle = (name: string, value: string) => {
    const current = params.getAll(name);
    go({ [name]: current.includes(value) ? current.filter((v) => v !== value) : [...current, value] });
  };
  const applyForm = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next: Record<string, string | undefined> = {};
    for (const [name] of TEXT_FILTERS) next[name] = String(form.get(name) ?? '').trim() || undefined;
    for (const [name] of TIME_FILTERS) {
      const value = String(form.get(name) ?? '');
      next[name] = value === '' ? undefined : new Date(value).toISOString();
    }
    const stuck = String(form.get('stuck') ?? '');
    next.stuck = stuck === '' ? undefined : stuck;
    go(next);
  };
  const page = (cursor: { after?: string; before?: string }) => navigate(withParams('/operations', { ...keepParams(params, 'after', 'before'), ...cursor }));

  // The text and time filters fold away on a phone unless one is set.
  const moreSet = [...TEXT_FILTERS, ...TIME_FILTERS, ['stuck']].filter(([name]) => params.get(name!)).length;
  const moreOpen = moreSet > 0 || window.matchMedia('(min-width: 761px)').matches;
  // The whole panel folds by default on a short screen (under 900 px tall), where it took 40 % of the height; its summary says how many filters are set.
  const chipsSet = ['state', 'lastKind', 'deferReason'].reduce((sum, name) => sum + params.getAll(name).length, 0);
  const panelOpen = window.matchMedia('(min-height: 900px)').matches;
  const rows = data?.operations.edges.map((edge) => changed.get(edge.node.id) ?? edge.node) ?? [];
  const info = data?.operations.pageInfo;
  const hasNewer = before !== null ? info?.hasPreviousPage === true : after !== null;
  const hasOlder = before !== null ? true : info?.hasNextPage === true;

  return (
    <div className="operations">
      <details className="filter-panel" open={panelOpen} data-testid="filter-panel">
        <summary>Filters{chipsSet + moreSet > 0 ? ` (${chipsSet + moreSet} set)` : ''}</summary>
      <form className="filters" onSubmit={applyForm} key={params.toString()} aria-label="Filters">
        <fieldset className="chips">
          <legend>State</legend>
          {Object.values(ConnectorOperationState).map((state) => (
            <label key={state} className="chip">
              <input type="checkbox" name="state" value={state} checked={params.getAll('state').includes(state)} onChange={() => toggle('state', state)} />
              <Badge value={state} />
            </label>
          ))}
        </fieldset>
        <fieldset className="chips">
          <legend>Last outcome</legend>
          {Object.values(OperationOutcomeKind).map((kind) => (
            <label key={kind} className="chip">
              <input type="checkbox" name="lastKind" value={kind} checked={params.getAll('lastKind').includes(kind)} onChange={() => toggle('lastKind', kind)} />
              <Badge value={kind} />
            </label>
          ))}
        </fieldset>
        <fieldset className="chips">
          <legend>Deferred for</legend>
          {Object.values(DeferReason).map((reason) => (
            <label key={reason} className="chip">
              <input type="checkbox" name="deferReason" value={reason} checked={params.getAll('deferReason').includes(reason)} onChange={() => toggle('deferReason', reason)} />
              <Badge value={reason} />
            </label>
          ))}
        </fieldset>
        <details className="more-filters" open={moreOpen}>
          <summary>More filters{moreSet > 0 ? ` (${moreSet} set)` : ''}</summary>
        <div className="inputs">
          {TEXT_FILTERS.map(([name, label, placeholder]) => (
            <label key={name}>
              <span>{label}</span>
              <input name={name} defaultValue={params.get(name) ?? ''} placeholder={placeholder} inputMode={name === 'minAttempts' ? 'numeric' : undefined} />
            </label>
          ))}
          <label>
            <span>Stuck</span>
            <select name="stuck" defaultValue={params.get('stuck') ?? ''}>
              <option value="">any</option>
              <option value="true">stuck only</option>
              <option value="false">not stuck</option>
            </select>
          </label>
          {TIME_FILTERS.map(([name, label]) => (
            <label key={name}>
              <span>{label}</span>
              <input type="datetime-local" name={name} defaultValue={toLocalInput(params.get(name))} />
            </label>
          ))}
        </div>
        </details>
        <div className="filter-actions">
          <button type="submit">Apply</button>
          {filtered && (
            <button type="button" className="secondary" onClick={() => navigate('/operations')}>
              Clear filters
            </button>
          )}
        </div>
      </form>
      </details>

      <div className="table-head">
        <h2>
          Operations <span className="muted" data-testid="operations-total">{data !== undefined ? total(data.operations.totalCount, data.operations.totalCountCapped, 'operation') : ''}</span>
        </h2>
        {fetching && data !== undefined && <span className="muted">refreshing…</span>}
      </div>
      {data !== undefined && (
        <BulkActions
          selected={rows.filter((row) => selected.has(row.id))}
          filter={filter}
          matching={data.operations.totalCount}
          matchingCapped={data.operations.totalCountCapped}
          onDone={(clearSelection) => {
            if (clearSelection) setSelected(new Set());
            refetch({ requestPolicy: 'network-only' });
          }}
        />
      )}
      {error !== undefined && <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />}
      {data === undefined && fetching && <Loading what="operations" />}
      {data !== undefined &&
        (rows.length === 0 && arrived.size === 0 ? (
          <Empty>{filtered ? 'No operation matches these filters.' : 'No operations yet: they appear here, live, as write-back clients claim them.'}</Empty>
        ) : (
          <div className="table-wrap">
            <table className="operations-table fold-narrow" data-testid="operations-table" ref={foldRef}>
              <thead>
                <tr>
                  <th className="select">
                    <input
                      type="checkbox"
                      aria-label="Select every operation on this page"
                      data-testid="select-page"
                      checked={rows.length > 0 && rows.every((row) => selected.has(row.id))}
                      onChange={(event) => setSelected(event.currentTarget.checked ? new Set(rows.map((row) => row.id)) : new Set())}
                    />
                  </th>
                  <th>Operation</th>
                  <th>State</th>
                  <th>Connector</th>
                  <th className="wide-only">Owner</th>
                  <th className="num">Attempts</th>
                  <th>Last outcome</th>
                  <th>Next attempt</th>
                  <th className="wide-only">Updated</th>
                </tr>
              </thead>
              <tbody>
                {arrived.size > 0 && (
                  <tr className="new-rows">
                    <td colSpan={9}>
                      <button
                        type="button"
                        className="link"
                        data-testid="new-rows"
                        onClick={() => {
                          setArrived(new Map());
                          refetch({ requestPolicy: 'network-only' });
                        }}
                      >
                        {arrived.size} new or changed operation{arrived.size === 1 ? '' : 's'}:{' '}
                        {[...arrived.values()]
                          .slice(-3)
                          .map((op) => `${op.operationID} (${op.state.replace(/_/g, ' ').toLowerCase()})`)
                          .join(', ')}
                        {arrived.size > 3 ? ', …' : ''} — show
                      </button>
                    </td>
                  </tr>
                )}
                {rows.map((op) => (
                  <tr key={op.id} className={changed.has(op.id) ? 'changed' : undefined} data-operation-id={op.operationID}>
                    <td className="select">
                      <input
                        type="checkbox"
                        aria-label={`Select ${op.operationID}`}
                        checked={selected.has(op.id)}
                        onChange={(event) => {
                          const checked = event.currentTarget.checked;
                          setSelected((current) => {
                            const next = new Set(current);
                            if (checked) next.add(op.id);
                            else next.delete(op.id);
                            return next;
                          });
                        }}
                      />
                    </td>
                    <td>
                      <OperationName op={op} />
                    </td>
                    <td>
                      <Badge value={op.state} />
                      {op.deferReason !== null && (
                        <div className="sub">
                          deferred: <Badge value={op.deferReason} />
                        </div>
                      )}
                    </td>
                    <td>
                      {op.connectorName}
                      <div className="sub muted">{op.model}</div>
                    </td>
                    <td className="wide-only">
                      <DID value={op.ownerDID} />
                    </td>
                    <td className="num">{op.attempts}</td>
                    <td>
                      <Badge value={op.lastKind} />
                      {op.lastHTTPStatus !== null && <span className="muted"> HTTP {op.lastHTTPStatus}</span>}
                    </td>
                    <td>
                      <Time compact value={op.state === 'ATTEMPTED' || op.state === 'RECONCILE_ONLY' ? op.nextAttemptAt : null} />
                    </td>
                    <td className="wide-only">
                      <Time compact value={op.updatedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      {data !== undefined && (
        <nav className="pager" aria-label="Pages">
          <button type="button" className="secondary" disabled={!hasNewer} onClick={() => info?.startCursor && page({ before: info.startCursor })}>
            ← Newer
          </button>
          {!firstPage && (
            <button type="button" className="link" onClick={() => page({})}>
              Newest
            </button>
          )}
          <button type="button" className="secondary" disabled={!hasOlder || rows.length === 0} onClick={() => info?.endCursor && page({ after: info.endCursor })}>
            Older →
          </button>
        </nav>
      )}
    </div>
  );
}
