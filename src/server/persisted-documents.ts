/**
 * Persisted documents (`PERSISTED_DOCUMENTS`): clients send an id instead of
 * a document, and in `only` mode nothing else runs, so a deployment serves
 * exactly the operations its clients were built with. The manifest is
 * GraphQL Code Generator's (client preset `persistedDocuments`): a JSON object
 * id → document, ids `sha256:<hex of the document>`; by default the one
 * generated from `client/operations/`, or `PERSISTED_DOCUMENTS_FILE`.
 *
 * Over HTTP through `@graphql-yoga/plugin-persisted-operations`: the id in
 * `documentId` (GraphQL over HTTP) or `extensions.persistedQuery.sha256Hash`
 * (Apollo's form, hex without the prefix). Over WebSocket the same rule is
 * applied in `websocket.ts` through {@link PersistedDocuments.resolve}.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { PROJECT_ROOT } from './paths.js';

/** `off`: documents only; `allow`: ids or documents; `only`: ids only. */
export type PersistedDocumentsMode = 'off' | 'allow' | 'only';

/** The manifest the repository's client documents generate. */
export const DEFAULT_MANIFEST = join(PROJECT_ROOT, 'client/generated/persisted-documents.json');

const ID = /^sha256:[0-9a-f]{64}$/;
const HEX = /^[0-9a-f]{64}$/;

/** The documents a server accepts by id. */
export interface PersistedDocuments {
  mode: Exclude<PersistedDocumentsMode, 'off'>;
  /** How many documents the manifest holds. */
  size: number;
  /**
   * The document a request runs: its own `query` (unless `only`), or the one
   * its id names. Throws a typed GraphQLError when the request is refused.
   */
  resolve(request: { query?: string | null; documentId?: unknown; extensions?: unknown }): string;
}

/** Why a manifest cannot be used: named in the start-up error. */
export class PersistedManifestError extends Error {}

/**
 * Reads and checks a manifest: every id has the `sha256:<hex>` form and is
 * the hash of its document (a stale or hand-edited manifest is refused at
 * start, not at the first request).
 */
export function loadPersistedDocuments(mode: Exclude<PersistedDocumentsMode, 'off'>, file: string = DEFAULT_MANIFEST): PersistedDocuments {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new PersistedManifestError(`cannot read the persisted-documents manifest ${file}: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new PersistedManifestError(`${file} must be a JSON object of id → document`);
  }
  const documents = new Map<string, string>();
  for (const [id, document] of Object.entries(parsed)) {
    if (!ID.test(id) || typeof document !== 'string') throw new PersistedManifestError(`${file}: ${JSON.stringify(id.slice(0, 80))} is not "sha256:<hex>" → document`);
    if (`sha256:${createHash('sha256').update(document).digest('hex')}` !== id) {
      throw new PersistedManifestError(`${file}: the document of ${id} does not hash to its id (regenerate the manifest: npm run codegen)`);
    }
    documents.set(id, document);
  }
  return {
    mode,
    size: documents.size,
    resolve(request) {
      const id = persistedIDOf(request);
      if (id === undefined) {
        if (typeof request.query === 'string' && request.query !== '') {
          if (mode === 'only') throw refusal('PERSISTED_QUERY_ONLY', ONLY);
          return request.query;
        }
        throw refusal('PERSISTED_QUERY_ID_REQUIRED', ID_REQUIRED);
      }
      const document = documents.get(id);
      if (document === undefined) throw refusal('PERSISTED_QUERY_NOT_FOUND', NOT_FOUND);
      return document;
    },
  };
}

const ONLY = 'this server runs only persisted documents: send `documentId` (ids: client/generated/persisted-documents.json)';
const ID_REQUIRED = 'send a document (`query`) or the id of a persisted one (`documentId`)';
const NOT_FOUND = "no persisted document has this id (is the client newer than the server's manifest?)";

/** The id a request names: `documentId`, or Apollo's `extensions.persistedQuery.sha256Hash` (hex, given the `sha256:` prefix). */
function persistedIDOf(request: { documentId?: unknown; extensions?: unknown }): string | undefined {
  if (typeof request.documentId === 'string') return request.documentId;
  const persisted = (request.extensions as { persistedQuery?: { version?: unknown; sha256Hash?: unknown } } | null | undefined)?.persistedQuery;
  if (persisted?.version === 1 && typeof persisted.sha256Hash === 'string') return HEX.test(persisted.sha256Hash) ? `sha256:${persisted.sha256Hash}` : persisted.sha256Hash;
  return undefined;
}

function documentIdOfURL(url: string): { documentId?: string } {
  const documentId = new URL(url).searchParams.get('documentId');
  return documentId === null ? {} : { documentId };
}

function refusal(code: string, message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code, http: { status: code === 'PERSISTED_QUERY_NOT_FOUND' ? 404 : 400 } } });
}

/** The HTTP side: yoga's persisted-operations plugin over the same manifest and rule. */
export function usePersistedDocuments(documents: PersistedDocuments): Plugin {
  return usePersistedOperations({
    allowArbitraryOperations: documents.mode === 'allow',
    // Yoga's GET parser keeps only query, variables, operationName and extensions: a GET's `documentId` is read from its URL.
    extractPersistedOperationId: (params, request) =>
      persistedIDOf({ ...(params as { documentId?: unknown; extensions?: unknown }), ...(request.method === 'GET' && documentIdOfURL(request.url)) }) ?? null,
    getPersistedOperation: (id) => {
      try {
        return documents.resolve({ documentId: id });
      } catch {
        return null;
      }
    },
    customErrors: {
      notFound: () => refusal('PERSISTED_QUERY_NOT_FOUND', NOT_FOUND),
      persistedQueryOnly: () => refusal('PERSISTED_QUERY_ONLY', ONLY),
      keyNotFound: () => refusal('PERSISTED_QUERY_ID_REQUIRED', ID_REQUIRED),
    },
  }) as Plugin;
}
