/** Ownership across areas: whether a DID owns any row (an admission hint for long-lived streams). */
export { ownsAnyRow } from './owns-rows.js';
