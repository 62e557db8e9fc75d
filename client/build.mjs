// Builds the package into dist/: tsc (tsconfig.build.json), then the
// persisted-documents manifest beside the generated documents. Run by
// `npm run client:build` at the repository root and by `npm pack` here.
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
rmSync(`${here}dist`, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', `${here}tsconfig.build.json`], { stdio: 'inherit' });
copyFileSync(`${here}generated/persisted-documents.json`, `${here}dist/generated/persisted-documents.json`);
