/** Observation records and repair obligations (SPEC §3.6). */
export { getObservationRecordsByDocumentIDs, listObservationRecords, putObservationRecord } from './records.js';
export type { ListObservationRecordsOptions } from './records.js';
export {
  countObservationRepairs,
  deleteObservationRepair,
  getObservationRepair,
  getObservationRepairsByDocumentIDs,
  listRepairsWrittenSince,
  upsertObservationRepair,
} from './repairs.js';
export type { ListRepairsWrittenSinceOptions, RepairPage } from './repairs.js';
export { OBSERVATION_RECORD_TYPE } from './types.js';
export type { ObservationRecord, ObservationRecordInput, ObservationRepair, ObservationRepairInput, RepairCursor } from './types.js';
