/**
 * Sweeps per partition: each listing pass (receipt) with its candidates'
 * counts by state and its partition's checkpoint; in progress (uncommitted)
 * by default. Live: a change of a receipt or one of its candidates re-reads.
 */
import { useMemo } from 'react';
import { useQuery, useSubscription } from 'urql';
import { ConsoleSweepsDocument, SweepCandidateState, SweepProgressDocument, type SweepReceiptFilter } from '../../../client/generated/graphql';
import { useThrottle } from '../live';
import { navigate, withParams, type Route } from '../router';
import { Badge, DID, Empty, ErrorState, Loading, Time, total } from '../ui';

export function Sweeps({ route }: { route: Route }) {
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
            <table data-testid="sweeps-table">
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
                        <code>{receipt.partition}</code>
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
