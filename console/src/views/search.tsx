/**
 * The header's search (issue 22 item 3): one text looked up as an
 * operation's idempotency key (any caller's), a document ID and, when it is
 * a DID, an owner, in one request; every part reads an index
 * (test/store/search-plans.test.ts). Each section links on: an operation to
 * its page, a document's or an owner's operations to the filtered table.
 */
import { useQuery } from 'urql';
import { ConsoleSearchDocument, type ConsoleOperationRowFragment } from '../../../client/generated/graphql';
import { Link, withParams, type Route } from '../router';
import { Badge, DID, Empty, ErrorState, Loading, Time, total } from '../ui';
import { OperationName } from './operations';
import type { Viewer } from '../session';

/** Whether `text` is shaped like a DID (did:method:identifier), so it can be looked up as an owner. */
export function looksLikeDID(text: string): boolean {
  return /^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$/.test(text);
}

/** Keys starting with the text shown at most (one more is read, to say there are more). */
const PREFIX_MATCHES = 10;

export function Search({ route, viewer }: { route: Route; viewer: Viewer }) {
  const text = (route.params.get('q') ?? '').trim();
  const isDID = looksLikeDID(text);
  const [{ data, fetching, error }, refetch] = useQuery({
    query: ConsoleSearchDocument,
    variables: { text, owner: isDID ? text : null, isDID, isService: viewer.isService },
    pause: text === '',
  });
  if (text === '')
    return (
      <Empty>
        Type an exact operation ID (its idempotency key), document ID or owner’s DID in the search box above
        {viewer.isService ? '; operation IDs that start with what you type are offered too' : ''}.
      </Empty>
    );
  if (data === undefined && fetching) return <Loading what={`“${text}”`} />;
  if (data === undefined && error !== undefined) return <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  if (data === undefined) return null;
  const sections: [title: string, rows: ConsoleOperationRowFragment[], count: string, more: string | null][] = [
    ['Operations with this ID', data.byOperationID.edges.map((e) => e.node), total(data.byOperationID.totalCount, data.byOperationID.totalCountCapped, 'operation'), null],
    [
      'Operations of this document',
      data.byDocument.edges.map((e) => e.node),
      total(data.byDocument.totalCount, data.byDocument.totalCountCapped, 'operation'),
      withParams('/operations', { documentID: text }),
    ],
  ];
  // Keys that start with the text, other than the text itself (those are the first section).
  const startingWith = (data.byPrefix ?? []).filter((op) => op.operationID !== text);
  if (startingWith.length > 0) {
    const more = startingWith.length > PREFIX_MATCHES || (data.byPrefix?.length ?? 0) > PREFIX_MATCHES;
    sections.push(['Operation IDs that start with this', startingWith.slice(0, PREFIX_MATCHES), more ? `the first ${PREFIX_MATCHES} in key order; type more to narrow` : `${startingWith.length} operation${startingWith.length === 1 ? '' : 's'}`, null]);
  }
  if (data.byOwner != null) {
    sections.push(['Operations this DID owns', data.byOwner.edges.map((e) => e.node), total(data.byOwner.totalCount, data.byOwner.totalCountCapped, 'operation'), withParams('/operations', { ownerDID: text })]);
  }
  const watches = data.watches.edges.map((e) => e.node);
  const found = sections.some(([, rows]) => rows.length > 0) || watches.length > 0;

  return (
    <div className="search-results" data-testid="search-results">
      <h2>
        Search <span className="muted">“{text}”</span>
      </h2>
      {error !== undefined && <ErrorState error={error} />}
      {!found && (
        <Empty>
          Nothing you may see has exactly this operation ID{isDID ? ', owner' : ''} or document ID{viewer.isService ? ', and no operation ID starts with it' : ' (search matches whole IDs)'}.
        </Empty>
      )}
      {sections
        .filter(([, rows]) => rows.length > 0)
        .map(([title, rows, count, more]) => (
          <section key={title} className="panel panel-wide" data-testid="search-section">
            <h3>
              {title} <span className="muted">({count})</span>
              {more !== null && (
                <>
                  {' '}
                  <Link to={more}>open in the table →</Link>
                </>
              )}
            </h3>
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>Operation</th>
                    <th>State</th>
                    <th>Connector</th>
                    <th className="wide-only">Owner</th>
                    <th>Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((op) => (
                    <tr key={op.id} data-operation-id={op.operationID}>
                      <td>
                        <OperationName op={op} />
                      </td>
                      <td>
                        <Badge value={op.state} />
                      </td>
                      <td>{op.connectorName}</td>
                      <td className="wide-only">
                        <DID value={op.ownerDID} />
                      </td>
                      <td>
                        <Time value={op.updatedAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>
        ))}
      {watches.length > 0 && (
        <section className="panel panel-wide" data-testid="search-section">
          <h3>Watches of this document</h3>
          <ul className="plain">
            {watches.map((watch) => (
              <li key={watch.id}>
                <Link to={`/watches/${encodeURIComponent(watch.id)}`}>
                  {watch.connectorName} · {watch.model}
                </Link>{' '}
                <Badge value={watch.verificationStatus} /> <DID value={watch.ownerDID} />
              </li>
            ))}
          </ul>
        </section>
      )}
    </div>
  );
}
