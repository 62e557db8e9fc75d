/** Field-level input rules shared by every input type (zod, via the validation plugin). */
import { z } from 'zod';

/** Names: connector, model. */
export const nameInput = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');
/** Free text keys and hashes: idempotency keys, targets, tokens, digests. */
export const textInput = z.string().min(1, 'must not be empty').max(2048, 'must be at most 2048 characters');
/** Lease lengths: 1 s to 1 h. */
export const leaseMsInput = z.number().int().min(1_000, 'must be at least 1000 ms').max(3_600_000, 'must be at most 1 hour');
/** Versions and generations: non-negative integers. */
export const versionInput = z.number().int().min(0, 'must not be negative');
/** Local document ids. */
export const documentIDInput = z.string().min(1, 'must not be empty').max(512, 'must be at most 512 characters');
