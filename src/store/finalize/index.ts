/** Finalize-and-arm (SPEC §3.4): commit a leased operation and arm its document's watch atomically. */
export {
  FINALIZE_ANSWER,
  finalizeOperationAndArmWatch,
  finalizeOperationStep,
  type FinalizeOperationInput,
  type FinalizeOperationResult,
} from './finalize-operation-and-arm-watch.js';
