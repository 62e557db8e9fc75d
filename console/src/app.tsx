/**
 * The console: sign-in when there is no session, else the layout (navigation,
 * who you are) around the view the route names.
 */
import { useEffect, useMemo, useState, useSyncExternalStore } from 'react';
import { Provider, useQuery } from 'urql';
import { ConsoleServerInfoDocument } from '../../client/generated/graphql';
import { createConsoleClient } from './graphql';
import { Link, navigate, useRoute } from './router';
import { clearStoredSession, developmentToken, restoreSession, sessionFromToken, type Session, type Viewer } from './session';
import { SignIn } from './sign-in';
import { POLL_REFUSED_MS, type LiveStream, type PageStatus } from './stream';
import { DID, ErrorState, Loading } from './ui';
import { OperationDetail } from './views/operation-detail';
import { Operations } from './views/operations';
import { Overview } from './views/overview';
import { Search } from './views/search';
import { SweepDetail, Sweeps } from './views/sweeps';
import { SyncStateDetail, SyncStates, WatchDetail, Watches } from './views/watches';

const NAV: [path: string, label: string][] = [
  ['/', 'Overview'],
  ['/operations', 'Operations'],
  ['/watches', 'Watches'],
  ['/sync-states', 'Sync states'],
  ['/sweeps', 'Sweeps'],
];

export function App() {
  const [session, setSession] = useState<Session | null>(() => restoreSession());
  const [message, setMessage] = useState<string | null>(null);
  const [checkingDevelopment, setCheckingDevelopment] = useState(session === null);

  // A development server hands this (loopback) page a token of its local key: no pasting.
  useEffect(() => {
    if (session !== null || !checkingDevelopment) return;
    let cancelled = false;
    void developmentToken().then((token) => {
      if (cancelled) return;
      if (token !== null) setSession(sessionFromToken(token, 'development key'));
      setCheckingDevelopment(false);
    });
    return () => {
      cancelled = true;
    };
  }, [session, checkingDevelopment]);

  const signOut = (why: string | null) => {
    clearStoredSession();
    setMessage(why);
    setSession(null);
  };

  if (session === null) {
    if (checkingDevelopment) return <Loading what="the console" />;
    return (
      <SignIn
        message={message}
        onSignedIn={(next) => {
          setMessage(null);
          setSession(next);
        }}
      />
    );
  }
  return <SignedIn key={session.did ?? 'session'} session={session} onSignOut={signOut} />;
}

function SignedIn({ session, onSignOut }: { session: Session; onSignOut: (why: string | null) => void }) {
  const { client, stream, dispose } = useMemo(() => createConsoleClient(session, (why) => onSignOut(`The server refused the token: ${why}`)), [session]); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => dispose, [dispose]);
  return (
    <Provider value={client}>
      <Layout session={session} stream={stream} onSignOut={() => onSignOut(null)} />
    </Provider>
  );
}

const STATUS_TEXT: Record<PageStatus, [label: string, title: string]> = {
  live: ['Live', 'Connected: changes show as they happen'],
  connecting: ['Connecting…', 'Waiting for the server to accept this page’s live updates'],
  limited: ['Refreshing', 'The server refused some live updates of this page (see the notice); the page re-reads every few seconds instead'],
  reconnecting: ['Reconnecting…', 'The connection to the server broke; trying again'],
  offline: ['Offline · retrying', 'The server does not answer; the page tries again every few seconds and re-reads when it is back'],
};

/** Why the server refused some of this page's live updates, and what the page does instead; nothing while none is refused. */
function RefusalNotice({ stream }: { stream: LiveStream }) {
  const refusals = useSyncExternalStore(stream.onStatus, stream.refusals);
  if (refusals.length === 0) return null;
  return (
    <div className="notice warn" role="status" data-testid="live-refused">
      Live updates are off for part of this page: {refusals.join('; ')}. The page re-reads every {POLL_REFUSED_MS / 1000} s instead and tries live updates again
      every 30 s.
    </div>
  );
}

/** Whether the page is live, connecting, limited, reconnecting or offline (stream.ts decides; no click needed to come back). */
function LiveStatusBadge({ stream }: { stream: LiveStream }) {
  const status = useSyncExternalStore(stream.onStatus, stream.status);
  const [label, title] = STATUS_TEXT[status];
  return (
    <span className={`live-status live-status-${status}`} data-live-status={status} title={title} role="status">
      <span className="live-dot" aria-hidden="true" />
      {label}
    </span>
  );
}

/** The search box on every page: an operation ID, a document ID or an owner DID (views/search.tsx). */
function SearchBox({ current }: { current: string }) {
  return (
    <form
      className="search"
      role="search"
      key={current}
      onSubmit={(event) => {
        event.preventDefault();
        const text = String(new FormData(event.currentTarget).get('q') ?? '').trim();
        if (text !== '') navigate(`/search?q=${encodeURIComponent(text)}`);
      }}
    >
      <input name="q" type="search" defaultValue={current} placeholder="Exact operation ID, document ID or owner DID" title="Exact operation ID, document ID or owner DID" aria-label="Search by exact operation ID, document ID or owner DID" data-testid="search-input" />
    </form>
  );
}

function Layout({ session, stream, onSignOut }: { session: Session; stream: LiveStream; onSignOut: () => void }) {
  const route = useRoute();
  const [{ data, error }] = useQuery({ query: ConsoleServerInfoDocument, requestPolicy: 'cache-first' });
  const info = data?.serverInfo;
  const viewer: Viewer = { did: info?.viewerDID ?? session.did, isService: info?.viewerIsService ?? false };
  const section = NAV.slice(1).find(([path]) => route.path.startsWith(path))?.[0] ?? '/';

  return (
    <div className="layout">
      <header className="top">
        <Link to="/" className="brand">
          Connector store
        </Link>
        <nav className="nav" aria-label="Views">
          {NAV.map(([path, label]) => (
            <Link key={path} to={path} aria-current={section === path ? 'page' : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <SearchBox current={route.path === '/search' ? (route.params.get('q') ?? '') : ''} />
        <div className="who" title={`Signed in with a ${session.source}${info !== undefined ? ` · server v${info.version} on ${info.dialect}` : ''}`}>
          <LiveStatusBadge stream={stream} />
          <span className="who-kind">{viewer.isService ? 'service' : 'user'}</span> <DID value={viewer.did} />
          <span className="muted who-source"> · {session.source}</span>
          {info !== undefined && (
            <span className="muted who-server">
              {' '}
              · v{info.version} on {info.dialect}
            </span>
          )}
          <button type="button" className="link" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main className="main">
        <RefusalNotice stream={stream} />
        {error !== undefined && <ErrorState error={error} />}
        <View route={route} viewer={viewer} />
      </main>
    </div>
  );
}

function View({ route, viewer }: { route: ReturnType<typeof useRoute>; viewer: Viewer }) {
  const [, section, id] = route.path.split('/').map(decodeURIComponent);
  switch (section) {
    case '':
    case undefined:
      return <Overview />;
    case 'operations':
      return id ? <OperationDetail key={id} id={id} viewer={viewer} /> : <Operations route={route} />;
    case 'watches':
      return id ? <WatchDetail key={id} id={id} /> : <Watches route={route} />;
    case 'sync-states':
      return id ? <SyncStateDetail key={id} id={id} /> : <SyncStates route={route} />;
    case 'sweeps':
      return id ? <SweepDetail key={id} id={id} route={route} /> : <Sweeps route={route} />;
    case 'search':
      return <Search key={route.params.get('q') ?? ''} route={route} viewer={viewer} />;
    default:
      return (
        <div className="state state-empty">
          No such page. <button type="button" className="link" onClick={() => navigate('/')}>Go to the overview</button>
        </div>
      );
  }
}
