/**
 * The schema cannot break silently (issue 23): today's schema against
 * schema/released.graphql passes `npm run schema:check`, and the rules hold
 * on small schemas: a breaking change fails unless what it breaks was
 * deprecated in the released schema and CHANGELOG's unreleased section names
 * it; dangerous changes are listed, safe ones counted.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { printSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { checkSchemaCompatibility, unreleasedSection } from '../../src/cli/schema-check.js';
import { schema } from '../../schema/index.js';

const RELEASED = `
type Query {
  sweep(receipt: ID!): String
  legacy: Int @deprecated(reason: "Use modern; removed in 0.3.0.")
  modern: Int
  kept: Int
}
union Result = A | B
type A { a: Int }
type B { b: Int }
enum Kind { ONE TWO }
`;
const CHANGELOG = (entries: string) => `# Changelog\n\n## 0.2.0 (unreleased)\n\n${entries}\n\n## 0.1.0\n\n- \`Query.kept\` was mentioned in an old release.\n`;

describe('schema compatibility', () => {
  it('today’s schema breaks nothing released without announcing it (npm run schema:check)', async () => {
    const [released, changelog] = await Promise.all([readFile('schema/released.graphql', 'utf8'), readFile('CHANGELOG.md', 'utf8')]);
    const result = await checkSchemaCompatibility(released, printSchema(schema), changelog);
    expect(result.breaking.filter((change) => !change.allowed), JSON.stringify(result.breaking, null, 2)).toEqual([]);
    expect(result.ok).toBe(true);
  });

  it('the command exits 0 and prints its report', async () => {
    const { stdout } = await promisify(execFile)('npx', ['tsx', 'src/cli/index.ts', 'schema-check'], { encoding: 'utf8' });
    expect(stdout).toMatch(/^schema check: \d+ breaking, \d+ dangerous, \d+ safe change\(s\) since the released schema\n/);
    expect(stdout).toMatch(/\nok\n$/);
  }, 60_000);

  it('refuses a removal that was not deprecated first, even when the changelog names it', async () => {
    const current = RELEASED.replace('  kept: Int\n', '');
    const result = await checkSchemaCompatibility(RELEASED, current, CHANGELOG('- Removed `Query.kept`.'));
    expect(result.ok).toBe(false);
    expect(result.breaking).toEqual([expect.objectContaining({ path: 'Query.kept', allowed: false, why: 'not deprecated in the released schema first' })]);
  });

  it('refuses a removal of a deprecated field that the unreleased section does not name (an older section does not count)', async () => {
    const current = RELEASED.replace(/ {2}legacy: .*\n/, '');
    const result = await checkSchemaCompatibility(RELEASED, current, CHANGELOG('- Nothing about it.').replace('`Query.kept`', '`Query.legacy`'));
    expect(result.breaking).toEqual([expect.objectContaining({ path: 'Query.legacy', allowed: false, why: 'not named in CHANGELOG’s unreleased section' })]);
  });

  it('allows removing a field deprecated in the released schema and named in the unreleased section', async () => {
    const current = RELEASED.replace(/ {2}legacy: .*\n/, '');
    const result = await checkSchemaCompatibility(RELEASED, current, CHANGELOG('- Removed `Query.legacy` (deprecated since 0.1.0).'));
    expect(result).toMatchObject({ ok: true, breaking: [{ path: 'Query.legacy', allowed: true }] });
  });

  it('a changed argument type is breaking unless its field was deprecated and it is named', async () => {
    const current = RELEASED.replace('sweep(receipt: ID!)', 'sweep(receipt: Int!)');
    const refused = await checkSchemaCompatibility(RELEASED, current, CHANGELOG('- `Query.sweep.receipt` is an Int now.'));
    expect(refused.ok).toBe(false);
    expect(refused.breaking[0]).toMatchObject({ path: 'Query.sweep.receipt', allowed: false });
  });

  it('lists dangerous changes and counts safe ones without failing', async () => {
    const current = RELEASED.replace('union Result = A | B', 'union Result = A | B | C\ntype C { c: Int }')
      .replace('enum Kind { ONE TWO }', 'enum Kind { ONE TWO THREE }')
      .replace('sweep(receipt: ID!)', 'sweep(receipt: ID, id: ID)');
    const result = await checkSchemaCompatibility(RELEASED, current, CHANGELOG(''));
    expect(result.ok).toBe(true);
    expect(result.breaking).toEqual([]);
    expect(result.dangerous.map((change) => change.path).sort()).toEqual(['Kind.THREE', 'Query.sweep.id', 'Result']);
    expect(result.safe).toBeGreaterThanOrEqual(2);
  });

  it('removing a type nothing could return or take (unreachable from the roots) is safe; a reachable one is breaking', async () => {
    const released = `${RELEASED}\ntype Orphan { o: Int }\n`;
    const orphanGone = await checkSchemaCompatibility(released, RELEASED, CHANGELOG(''));
    expect(orphanGone).toMatchObject({ ok: true, breaking: [] });
    const withResult = RELEASED.replace('  kept: Int\n', '  kept: Int\n  result: Result\n');
    const reachableGone = await checkSchemaCompatibility(withResult, withResult.replace('union Result = A | B', 'union Result = A').replace('type B { b: Int }', ''), CHANGELOG(''));
    expect(reachableGone.ok).toBe(false);
    expect(reachableGone.breaking.map((change) => change.path)).toContain('B');
  });

  it('finds the unreleased section', () => {
    expect(unreleasedSection(CHANGELOG('- x'))).toContain('- x');
    expect(unreleasedSection(CHANGELOG('- x'))).not.toContain('old release');
    expect(unreleasedSection('# Changelog\n\n## 0.1.0\n\n- y\n')).toBe('');
  });
});
