// The function kinds this SDK implements: its rows of wit/roles.toml, the
// table of kinds that the host and every SDK take theirs from.
//
// Generated from the table by test/roles.test.mjs, which fails while they
// disagree (WEIR_BLESS=1 makes it write this file). Do not edit.

/**
 * One kind of function: a row of wit/roles.toml (its header describes
 * the fields).
 * @typedef {{ name: string, doc: string, spec: string, trait: string, world: string,
 *   export: string, extends: string | null, imports: readonly string[], inputs: string }} Role
 */

/** @type {readonly Role[]} The kinds, in the table's order. */
export const ROLES = Object.freeze([
  Object.freeze({ name: 'key', doc: 'Computes keys', spec: 'key', trait: 'KeyFunction', world: 'key-function', export: 'key-fn', extends: null, imports: ['context'], inputs: 'events' }),
  Object.freeze({ name: 'transform', doc: 'Transforms events without state (map, filter, flat-map)', spec: 'transform', trait: 'TransformFunction', world: 'transform-function', export: 'transform-fn', extends: null, imports: ['context'], inputs: 'events' }),
  Object.freeze({ name: 'process', doc: 'Processes keyed events', spec: 'process', trait: 'ProcessFunction', world: 'process-function', export: 'process-fn', extends: null, imports: ['state', 'timers', 'context'], inputs: 'keyed' }),
  Object.freeze({ name: 'aggregate', doc: 'Aggregates windows', spec: 'aggregate', trait: 'AggregateFunction', world: 'aggregate-function', export: 'aggregate-fn', extends: null, imports: ['context'], inputs: 'windowed' }),
]);
