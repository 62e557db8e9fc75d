/** GraphQL documents shared by the watch, document and access tests. */

export const WATCH_FIELDS = /* GraphQL */ `
  fragment WatchFields on ProjectionWatch {
    id
    ownerDID
    connectorName
    model
    accountKey
    sourceID
    documentID
    verifiedStateDigest
    observedWinnerDigest
    verificationStatus
    verificationAttempts
    repairGeneration
    nextAttemptAt
    claimedUntil
    deferReason
    version
  }
`;

const ERROR_FIELDS = /* GraphQL */ `
  ... on Error { code message }
  ... on InputValidationError { issues { path message } }
`;

export const FINALIZE = /* GraphQL */ `
  mutation Finalize($input: FinalizeOperationInput!) {
    finalizeOperation(input: $input) {
      __typename
      ... on FinalizeOperationPayload {
        finalized
        operation { id state documentID resultEntity version leaseExpiresAt }
        watch { ...WatchFields }
      }
      ${ERROR_FIELDS}
      ... on IdempotencyConflictError { fields }
    }
  }
  ${WATCH_FIELDS}
`;

export const REQUEST_REPULL = /* GraphQL */ `
  mutation Repull($input: RequestRepullInput!) {
    requestRepull(input: $input) {
      __typename
      ... on WatchPayload { watch { ...WatchFields } }
      ${ERROR_FIELDS}
    }
  }
  ${WATCH_FIELDS}
`;

export const CLAIM_WATCH_ATTEMPT = /* GraphQL */ `
  mutation ClaimWatch($input: ClaimWatchAttemptInput!) {
    claimWatchAttempt(input: $input) {
      __typename
      ... on WatchPayload { watch { ...WatchFields } }
      ${ERROR_FIELDS}
    }
  }
  ${WATCH_FIELDS}
`;

export const RECORD_VERIFICATION = /* GraphQL */ `
  mutation Verify($input: RecordVerificationInput!) {
    recordVerification(input: $input) {
      __typename
      ... on RecordVerificationPayload { stale watch { ...WatchFields } }
      ... on InvalidInputError { field }
      ${ERROR_FIELDS}
    }
  }
  ${WATCH_FIELDS}
`;

export const WATCH_NODE = /* GraphQL */ `
  query WatchNode($id: ID!) { node(id: $id) { __typename ... on ProjectionWatch { ...WatchFields } } }
  ${WATCH_FIELDS}
`;

export const WATCHES = /* GraphQL */ `
  query Watches($first: Int, $after: String, $last: Int, $before: String, $filter: WatchFilter) {
    watches(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
      totalCount
      edges { cursor node { id documentID ownerDID connectorName verificationStatus } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`;

export const SYNC_STATE_FIELDS = /* GraphQL */ `
  fragment SyncStateFields on SyncState {
    id
    connectorName
    ownerDID
    checkpoint
    lastSyncedAt
    entityCount
    status
    error
    recovery
    version
    incarnation
  }
`;

export const SYNC_STATES = /* GraphQL */ `
  query SyncStates($first: Int, $after: String, $last: Int, $before: String, $filter: SyncStateFilter) {
    syncStates(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
      totalCount
      edges { cursor node { ...SyncStateFields } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
  ${SYNC_STATE_FIELDS}
`;

export const UPDATE_SYNC_PROGRESS = /* GraphQL */ `
  mutation Progress($input: UpdateSyncProgressInput!) {
    updateSyncProgress(input: $input) {
      __typename
      ... on UpdateSyncProgressPayload { applied syncState { ...SyncStateFields } }
      ${ERROR_FIELDS}
    }
  }
  ${SYNC_STATE_FIELDS}
`;

export const DOCUMENT_FIELDS = /* GraphQL */ `
  fragment DocumentFields on DocumentConnectorState {
    documentID
    operations { id state ownerDID callerDID }
    watch { id sourceID ownerDID }
    entityTrim { documentID ownerDID connectorName trimmedFields }
    hasConnectorWork
  }
`;

export const DOCUMENT = /* GraphQL */ `
  query Document($documentID: String!) { document(documentID: $documentID) { ...DocumentFields } }
  ${DOCUMENT_FIELDS}
`;

export const DOCUMENTS = /* GraphQL */ `
  query Documents($documentIDs: [String!]!) { documents(documentIDs: $documentIDs) { ...DocumentFields } }
  ${DOCUMENT_FIELDS}
`;
