// Server-sent events read with `fetch`, since `EventSource` cannot send the
// `Authorization` header. `SseParser` is the event-stream grammar of the
// HTML standard (lines ending in CRLF, LF or CR; `data:` lines joined with
// LF; an event dispatched at a blank line; comments and unknown fields
// ignored; an unfinished event at the end of the stream dropped).

/** Parses event-stream text fed in arbitrary chunks. */
export class SseParser {
  constructor() {
    this.buffer = '';
    this.data = [];
    this.event = '';
    this.id = null;
    this.sawData = false;
    this.first = true;
  }

  /** Feed `text`; the events completed by it, `{ event, data, id }`. */
  push(text) {
    let input = this.buffer + text;
    if (this.first && input.length > 0) {
      if (input.charCodeAt(0) === 0xfeff) input = input.slice(1);
      this.first = false;
    }
    const events = [];
    let start = 0;
    for (;;) {
      const match = /\r\n|\r|\n/g;
      match.lastIndex = start;
      const found = match.exec(input);
      if (!found) break;
      // A CR at the very end may be the first half of a CRLF: wait.
      if (found[0] === '\r' && found.index === input.length - 1) break;
      this.line(input.slice(start, found.index), events);
      start = found.index + found[0].length;
    }
    this.buffer = input.slice(start);
    return events;
  }

  /** The end of the stream: a final CR ends its line; an event not closed
   * by a blank line is dropped, as the standard says. */
  end() {
    const events = [];
    if (this.buffer.endsWith('\r')) this.line(this.buffer.slice(0, -1), events);
    this.buffer = '';
    this.data = [];
    this.sawData = false;
    this.event = '';
    return events;
  }

  line(line, events) {
    if (line === '') {
      if (this.sawData) {
        events.push({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
      }
      this.data = [];
      this.sawData = false;
      this.event = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.data.push(value);
      this.sawData = true;
    } else if (field === 'event') {
      this.event = value;
    } else if (field === 'id' && !value.includes('\u0000')) {
      this.id = value;
    }
  }
}

/**
 * Read the event stream of `response` (a `fetch` answer), calling
 * `onEvent` for each event, until the server ends it or `signal` aborts.
 * Resolves when the stream ends; an abort rejects with an `AbortError`.
 */
export async function readEvents(response, onEvent, signal) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  const abort = () => reader.cancel().catch(() => {});
  signal?.addEventListener('abort', abort, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const event of parser.push(decoder.decode(value, { stream: true }))) onEvent(event);
    }
    for (const event of parser.push(decoder.decode())) onEvent(event);
    for (const event of parser.end()) onEvent(event);
  } finally {
    signal?.removeEventListener('abort', abort);
  }
  if (signal?.aborted) throw new DOMException('the tail was stopped', 'AbortError');
}

/** Keep the last `limit` items of `lines` plus `more`. */
export function keepLast(lines, more, limit = 100) {
  const all = lines.concat(more);
  return all.length > limit ? all.slice(all.length - limit) : all;
}
