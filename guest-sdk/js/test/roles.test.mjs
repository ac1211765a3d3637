// The SDK's function kinds are the table's: src/roles.js is generated from
// wit/roles.toml (the one table of kinds) and must match it, and the SDK's
// own per-kind code covers exactly the kinds its rows name.
//
// `WEIR_BLESS=1 npm test` writes src/roles.js from the table instead of
// failing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SDK_DIR } from '../src/build.js';

const TABLE = join(SDK_DIR, 'wit', 'roles.toml');
const MODULE = join(SDK_DIR, 'src', 'roles.js');

/**
 * The rows of the table: the subset of TOML it is written in (`[[role]]`,
 * `key = "text"`, one-line `key = ["a", "b"]`, whole-line comments).
 */
function readTable(text) {
  const rows = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (line === '[[role]]') return void rows.push({});
    const at = `${TABLE}:${index + 1}`;
    const m = /^([a-z_]+)\s*=\s*(.+)$/.exec(line);
    if (!m || rows.length === 0) throw new Error(`${at}: expected [[role]] or key = value`);
    const value = m[2].startsWith('[') ? JSON.parse(m[2].replace(/,\s*]$/, ']')) : JSON.parse(m[2]);
    rows[rows.length - 1][m[1]] = value;
  });
  return rows;
}

const FIELDS = ['name', 'doc', 'spec', 'trait', 'world', 'export', 'extends', 'imports', 'inputs'];

/** `value` (text, a list of texts or null) as the SDK's JavaScript writes it. */
function literal(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (/['\\\n]/.test(value)) throw new Error(`${TABLE}: ${JSON.stringify(value)} has a quote, backslash or newline`);
  return `'${value}'`;
}

/** src/roles.js as the table makes it. */
function render(rows) {
  const out = [
    '// The function kinds this SDK implements: its rows of wit/roles.toml, the',
    '// table of kinds that the host and every SDK take theirs from.',
    '//',
    '// Generated from the table by test/roles.test.mjs, which fails while they',
    '// disagree (WEIR_BLESS=1 makes it write this file). Do not edit.',
    '',
    '/**',
    ' * One kind of function: a row of wit/roles.toml (its header describes',
    ' * the fields).',
    ' * @typedef {{ name: string, doc: string, spec: string, trait: string, world: string,',
    ' *   export: string, extends: string | null, imports: readonly string[], inputs: string }} Role',
    ' */',
    '',
    '/** @type {readonly Role[]} The kinds, in the table\'s order. */',
    'export const ROLES = Object.freeze([',
  ];
  for (const row of rows.filter((r) => r.sdks.includes('typescript'))) {
    const fields = FIELDS.map((f) => `${f}: ${literal(row[f] ?? null)}`);
    out.push(`  Object.freeze({ ${fields.join(', ')} }),`);
  }
  out.push(']);', '');
  return out.join('\n');
}

test('src/roles.js is generated from wit/roles.toml', () => {
  const expected = render(readTable(readFileSync(TABLE, 'utf8')));
  const actual = readFileSync(MODULE, 'utf8');
  if (actual !== expected && process.env.WEIR_BLESS === '1') writeFileSync(MODULE, expected);
  else assert.equal(actual, expected, `${MODULE} disagrees with ${TABLE}: run the tests with WEIR_BLESS=1 to regenerate it`);
});

test('the SDK implements exactly its rows of the table', async () => {
  // Imported here, so the test above can still regenerate src/roles.js
  // when a row is missing from it.
  const { ROLES } = await import('../src/roles.js');
  const { EXPORTS, rolesOf, rolesWanted } = await import('../src/runtime.js');
  const names = ROLES.map((r) => r.name);
  assert.deepEqual(Object.keys(EXPORTS).sort(), [...names].sort(), "runtime.js's KINDS has an entry per row");
  for (const row of ROLES) assert.equal(EXPORTS[row.name], row.export);
  const declared = /export function rolesOf\(fn: object\): Array<([^>]*)>;/.exec(
    readFileSync(join(SDK_DIR, 'src', 'index.d.ts'), 'utf8'),
  );
  assert.ok(declared, 'index.d.ts declares rolesOf');
  const union = declared[1].split('|').map((s) => s.trim().replace(/^'|'$/g, ''));
  assert.deepEqual(union.sort(), [...names].sort(), "index.d.ts's rolesOf names the table's roles");
  assert.deepEqual(rolesOf({ key() {}, transform() {}, add() {}, result() {} }), ['key', 'aggregate', 'transform']);
  assert.match(rolesWanted(), /^key\(event\), process\(key, events, ctx\), .* or transform\(event, out\)$/);
});
