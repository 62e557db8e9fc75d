/** Entity trim records (SPEC §3.6): what a write trimmed to fit a model's caps, per document. */
export { clearEntityTrim, getEntityTrim, getEntityTrimsByDocumentIDs, setEntityTrim } from './entity-trim.js';
export type { SetEntityTrimOptions } from './entity-trim.js';
export type { EntityTrimInput, EntityTrimRecord, TrimmedFields } from './types.js';
