/**
 * Sign-in: paste a bearer token, or load a private key (an Ed25519 JWK such
 * as data/local-key.json) from which the page mints and renews its own
 * tokens. The audience comes from the server (`serverInfo.audience`, open to
 * anonymous callers). A development server signs a loopback page in by
 * itself (app.tsx); this form is what everyone else sees, with the server's
 * message when it refused the last token.
 */
import { useState, type ChangeEvent, type FormEvent } from 'react';
import { Client, fetchExchange } from 'urql';
import { ConsoleServerInfoDocument } from '../../client/generated/graphql';
import { sessionFromKey, sessionFromToken, tokenClaims, type Session } from './session';

/** The server's audience, asked anonymously (the sign-in has no token yet). */
async function serverAudience(): Promise<string> {
  const anonymous = new Client({ url: '/graphql', exchanges: [fetchExchange], fetchOptions: { credentials: 'omit' } });
  const { data, error } = await anonymous.query(ConsoleServerInfoDocument, {}).toPromise();
  if (error !== undefined) throw new Error(`the server did not answer (${error.message})`);
  if (data === undefined) throw new Error('the server did not say which audience its tokens need');
  return data.serverInfo.audience;
}

export function SignIn({ message, onSignedIn }: { message: string | null; onSignedIn: (session: Session) => void }) {
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const withToken = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const token = String(new FormData(event.currentTarget).get('token') ?? '').trim().replace(/^Bearer\s+/i, '');
    const claims = tokenClaims(token);
    if (claims === null) return setProblem('That is not a JWT (three base64url parts separated by dots).');
    if (typeof claims.exp === 'number' && claims.exp * 1000 <= Date.now()) return setProblem('That token has expired: mint a fresh one (npm run -s token).');
    onSignedIn(sessionFromToken(token, 'pasted token'));
  };

  const withKey = async (text: string) => {
    setBusy(true);
    setProblem(null);
    try {
      let jwk: unknown;
      try {
        jwk = JSON.parse(text);
      } catch {
        throw new Error('the key is not JSON: expected an Ed25519 private JWK like data/local-key.json');
      }
      onSignedIn(await sessionFromKey(jwk as never, await serverAudience()));
    } catch (error) {
      setProblem(`Could not use that key: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      setBusy(false);
    }
  };
  const keyFromForm = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    void withKey(String(new FormData(event.currentTarget).get('jwk') ?? ''));
  };
  const keyFromFile = async (event: ChangeEvent<HTMLInputElement>) => {
    const file = event.currentTarget.files?.[0];
    if (file !== undefined) await withKey(await file.text());
  };

  return (
    <div className="sign-in">
      <h1>Connector store console</h1>
      {message !== null && (
        <p className="notice bad" role="alert" data-testid="sign-in-message">
          {message}
        </p>
      )}
      {problem !== null && (
        <p className="notice bad" role="alert">
          {problem}
        </p>
      )}
      <form onSubmit={withToken} className="panel" aria-labelledby="with-token">
        <h2 id="with-token">With a bearer token</h2>
        <p className="muted">
          An EdDSA JWT of your did:key for this server’s audience (at most one hour). <code>npm run -s token</code> mints one for the local key. It is kept in this tab only
          (sessionStorage) and sent only to this server.
        </p>
        <textarea name="token" rows={4} required placeholder="eyJhbGciOiJFZERTQSIs…" aria-label="Bearer token" spellCheck={false} autoComplete="off" />
        <button type="submit">Sign in</button>
      </form>
      <form onSubmit={keyFromForm} className="panel" aria-labelledby="with-key">
        <h2 id="with-key">With a private key</h2>
        <p className="muted">
          An Ed25519 private JWK (<code>{'{"kty":"OKP","crv":"Ed25519","d":…}'}</code>, the format of <code>data/local-key.json</code>). The page mints 15-minute tokens from it and
          renews them before they expire; the key stays in this page’s memory and never leaves it.
        </p>
        <input type="file" accept="application/json,.json" onChange={keyFromFile} aria-label="Key file" disabled={busy} />
        <textarea name="jwk" rows={3} placeholder='{"kty":"OKP","crv":"Ed25519","d":"…","x":"…"}' aria-label="Private JWK" spellCheck={false} autoComplete="off" />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Use this key'}
        </button>
      </form>
    </div>
  );
}
