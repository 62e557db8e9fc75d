/** The connector rows of a document: pending work and the document sweep (SPEC §3.6). */
export { hasConnectorWorkByDocumentIDs, hasDocumentConnectorWork, sweepDocument, sweepDocumentRows, type DocumentSweepResult } from './document-sweep.js';
