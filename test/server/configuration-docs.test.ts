/**
 * docs/configuration.md lists every setting (issue 39 item 5): every variable
 * src/server/config.ts reads, and every other one the server, its command-line
 * tools and its start script read (found in their sources), is a row of one of
 * its tables; no row names a variable nothing reads; a row's default and range
 * are the schema's (an integer setting's bounds are accepted and one past
 * them refused; each value listed for a choice is accepted). The variables the
 * page lists as "not server settings" are read by the tests, benchmarks or
 * example.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, EnvSchema } from '../../src/server/config.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PAGE = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');

/** Files under `dir` (recursively) whose names end with one of `extensions`. */
function sources(dir: string, extensions: readonly string[]): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return sources(path, extensions);
    return extensions.some((extension) => name.endsWith(extension)) ? [path] : [];
  });
}

/** Variables a source reads by name: `process.env.X`, `env.X`, `io.env.X`, `env['X']`. */
function variablesRead(files: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const file of files) {
    for (const match of readFileSync(join(ROOT, file), 'utf8').matchAll(/\benv(?:\.([A-Z][A-Z0-9_]+)\b|\[['"]([A-Z][A-Z0-9_]+)['"]\])/g)) names.add(match[1] ?? match[2]!);
  }
  return names;
}

interface Row {
  name: string;
  defaultCell: string;
  rangeCell: string;
}

/** Each row of the page's tables whose first cell is one `VARIABLE`. */
function rows(): Row[] {
  return [...PAGE.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| ([^|]*) \| ([^|]*) \|/gm)].map((m) => ({ name: m[1]!, defaultCell: m[2]!.trim(), rangeCell: m[3]!.trim() }));
}

/** The variables the page's last section marks as read by tests, benchmarks or the example only. */
function notServerSettings(): string[] {
  const section = PAGE.slice(PAGE.indexOf('## Not server settings'));
  return [...section.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!);
}

const SERVER_SOURCES = [...sources('src', ['.ts']), ...sources('scripts', ['.mjs', '.ts'])];
const shape = EnvSchema.shape as Record<string, (typeof EnvSchema.shape)[keyof typeof EnvSchema.shape]>;

describe('docs/configuration.md', () => {
  it('has a row for every variable config.ts reads and every other one the server, its tools and start script read (or marks it as for tests only)', () => {
    const listed = new Set([...rows().map((row) => row.name), ...notServerSettings()]);
    const read = new Set([...CONFIG_VARIABLES, ...variablesRead(SERVER_SOURCES)]);
    expect([...read].filter((name) => !listed.has(name)).sort()).toEqual([]);
    // The schema's own keys are in CONFIG_VARIABLES (a variable added there is read).
    expect(Object.keys(shape).filter((name) => !CONFIG_VARIABLES.includes(name))).toEqual([]);
  });

  it('names no variable that nothing reads, and each once', () => {
    const read = new Set([...CONFIG_VARIABLES, ...variablesRead(SERVER_SOURCES)]);
    const names = rows().map((row) => row.name);
    expect(names.filter((name) => !read.has(name))).toEqual([]);
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });

  it("gives each schema default as the code has it, and an integer setting's range as the code checks it", () => {
    const problems: string[] = [];
    for (const row of rows()) {
      const schema = shape[row.name];
      if (schema === undefined) continue;
      const fallback = schema.safeParse(undefined);
      if (fallback.success && fallback.data !== undefined && !Array.isArray(fallback.data)) {
        const shown = /`([^`]*)`/.exec(row.defaultCell)?.[1];
        if (shown !== String(fallback.data)) problems.push(`${row.name}: default ${JSON.stringify(row.defaultCell)}, the code's is ${String(fallback.data)}`);
      }
      const bounds = /^(\d+)–(\d+)\b/.exec(row.rangeCell);
      if (bounds !== null) {
        const [min, max] = [Number(bounds[1]), Number(bounds[2])];
        for (const value of [min, max]) if (!schema.safeParse(String(value)).success) problems.push(`${row.name}: ${value} is refused`);
        if (min > 0 && schema.safeParse(String(min - 1)).success) problems.push(`${row.name}: ${min - 1} is accepted`);
        if (schema.safeParse(String(max + 1)).success) problems.push(`${row.name}: ${max + 1} is accepted`);
      }
      const choices = /^(`[^`]+`(?:, `[^`]+`)+)$/.exec(row.rangeCell);
      if (choices !== null) {
        for (const choice of choices[1]!.matchAll(/`([^`]+)`/g)) if (!schema.safeParse(choice[1]).success) problems.push(`${row.name}: ${choice[1]} is refused`);
        if (schema.safeParse('not-a-choice').success) problems.push(`${row.name}: accepts anything`);
      }
      if (row.rangeCell === 'boolean' && !['true', 'false', '1', '0', 'yes', 'no'].every((value) => schema.safeParse(value).success)) problems.push(`${row.name}: not a boolean`);
    }
    expect(problems).toEqual([]);
    // Most rows are checked by range, choice or boolean.
    const checked = rows().filter((row) => /^\d+–\d+\b|^`[^`]+`(, `[^`]+`)+$|^boolean$/.test(row.rangeCell) && shape[row.name] !== undefined);
    expect(checked.length).toBeGreaterThan(40);
  });

  it('lists as "not server settings" only variables the tests, benchmarks or example read', () => {
    const named = notServerSettings();
    expect(named.length).toBeGreaterThan(5);
    const elsewhere = [...sources('test', ['.ts']), ...sources('bench', ['.ts']), ...sources('examples', ['.ts']), 'vitest.config.ts'].map((file) => readFileSync(join(ROOT, file), 'utf8')).join('\n');
    expect(named.filter((name) => !new RegExp(`\\b${name}\\b`).test(elsewhere))).toEqual([]);
  });
});
