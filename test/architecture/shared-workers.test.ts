/**
 * The suite runs without isolation (vitest.config.ts `isolate: false`): each
 * worker runs its files one after another in one process, with the modules
 * loaded once. So no test file may reset the module registry (the schema's
 * modules would be evaluated again against the same @pothos/core, whose
 * plugins then register twice: "Received multiple implementations for plugin
 * noNulStrings", seen with `vi.resetModules()`), mock a module for the
 * files after it, or leave a global or an environment variable stubbed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** What a file does that would reach the files a worker runs after it. */
export function leaksToLaterFiles(text: string): string[] {
  const found: string[] = [];
  // Comments may name them.
  const source = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const call = (name: string) => new RegExp(`\\bvi\\.${name}\\(`);
  for (const name of ['resetModules', 'mock', 'doMock']) if (call(name).test(source)) found.push(`vi.${name}()`);
  if (call('stubGlobal').test(source) && !call('unstubAllGlobals').test(source)) found.push('vi.stubGlobal() without vi.unstubAllGlobals()');
  if (call('stubEnv').test(source) && !call('unstubAllEnvs').test(source)) found.push('vi.stubEnv() without vi.unstubAllEnvs()');
  return found;
}

describe('test files share their worker', () => {
  it('the check finds what it is for', () => {
    const vi = 'vi';
    expect(leaksToLaterFiles(`${vi}.resetModules();`)).toEqual(['vi.resetModules()']);
    expect(leaksToLaterFiles(`${vi}.mock('../x.js');`)).toEqual(['vi.mock()']);
    expect(leaksToLaterFiles(`${vi}.stubGlobal('a', 1);`)).toEqual(['vi.stubGlobal() without vi.unstubAllGlobals()']);
    expect(leaksToLaterFiles(`${vi}.stubGlobal('a', 1); afterEach(() => ${vi}.unstubAllGlobals());`)).toEqual([]);
    expect(leaksToLaterFiles(`${vi}.stubEnv('A', '1');`)).toEqual(['vi.stubEnv() without vi.unstubAllEnvs()']);
    expect(leaksToLaterFiles(`/** ${vi}.resetModules() */\n// ${vi}.mock()\nconst a = 1;`)).toEqual([]);
  });

  it('no test file resets the modules, mocks one, or leaves a global or the environment stubbed', () => {
    const self = fileURLToPath(import.meta.url);
    const leaks = testFiles(join(repo, 'test'))
      .filter((path) => path !== self)
      .flatMap((path) => leaksToLaterFiles(readFileSync(path, 'utf8')).map((what) => `${relative(repo, path)}: ${what}`));
    expect(leaks).toEqual([]);
  });
});
