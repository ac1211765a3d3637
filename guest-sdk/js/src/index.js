// @weir/sdk: write Weir stream functions in TypeScript or JavaScript.

export { Event, EventList, KeyWriter, bytes, text } from './event.js';
export { Cents, toJson } from './money.js';
export { Codec, Ttl, ValueState, MapState, ListState } from './state.js';
export { Context, LogLevel, TimeDomain } from './context.js';
export { FunctionError, rolesOf } from './runtime.js';
