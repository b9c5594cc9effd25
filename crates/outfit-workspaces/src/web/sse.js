// Server-Sent Events read with fetch (EventSource can't send the token): the parser of the
// event-stream format, a reader of a response body, and the loop that reads a stream again when
// it breaks. Pure: node's tests import it and feed it their own streams.

// Parses event-stream text, pushed in pieces cut anywhere, into events
// `{event, data, id}` given to onEvent, which returns false to stop.
// https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
export class EventStreamParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.lastEventId = ""; // kept across connections, sent back as Last-Event-ID
    this.retry = null; // the server's reconnection time in ms, once it sent one
    this.reset();
  }

  // Forgets the event under way (a new connection starts clean); keeps id and retry.
  reset() {
    this.buffer = "";
    this.event = "";
    this.data = [];
    this.stopped = false;
  }

  // Reads the whole lines in `text` and what came before it; false once onEvent said stop.
  push(text) {
    this.buffer += text;
    for (;;) {
      if (this.stopped) return false;
      const i = this.buffer.search(/[\r\n]/);
      if (i < 0) return true;
      let end = i + 1;
      if (this.buffer.charAt(i) === "\r") {
        if (end === this.buffer.length) return true; // its "\n" may come in the next piece
        if (this.buffer.charAt(end) === "\n") end++;
      }
      const line = this.buffer.slice(0, i);
      this.buffer = this.buffer.slice(end);
      this.line(line);
    }
  }

  // The stream ended: a "\r" held back for a "\n" was a line end after all. An event without
  // its blank line is dropped, as the format says.
  end() {
    if (this.buffer.endsWith("\r")) this.push("\n");
    return !this.stopped;
  }

  line(text) {
    if (text === "") return this.dispatch();
    if (text.charAt(0) === ":") return; // a comment: the server's keep-alive
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.charAt(0) === " ") value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.lastEventId = value;
    else if (field === "retry" && /^[0-9]+$/.test(value)) this.retry = Number(value);
  }

  dispatch() {
    const data = this.data;
    const event = this.event || "message";
    this.event = "";
    this.data = [];
    if (!data.length) return;
    if (this.onEvent({ event, data: data.join("\n"), id: this.lastEventId }) === false) this.stopped = true;
  }
}

// Reads a response body (a ReadableStream of bytes) through `parser` until it ends or the
// parser stops; true when it ended by itself. UTF-8 split across chunks is joined again.
export async function readEvents(body, parser) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) return parser.push(decoder.decode()) && parser.end();
      if (!parser.push(decoder.decode(chunk.value, { stream: true }))) return false;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// How long to wait before connecting again: the server's `retry:` when it sent one, else half a
// second more each attempt, five at most.
export function reconnectDelay(attempt, retry) {
  return retry !== null && retry !== undefined ? retry : Math.min(500 * attempt, 5000);
}

// Resolves after `ms`, or at once when `signal` aborts.
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

export const MAX_ATTEMPTS = 8;

// Follows one event stream to its end, connecting again when it breaks: up to MAX_ATTEMPTS in a
// row without an event between them.
// - connect(lastEventId): the body to read, or null when the answer was dealt with (the end);
//   it throws for a failure worth another try.
// - onEvent(event): false once the stream has said all it will (a final event).
// - onConnected(), onRetry(error): to tell the user; onGiveUp(error) after the last attempt.
// Ends when onEvent says so, when `signal` aborts, or after onGiveUp.
export async function keepReading({ connect, onEvent, onConnected, onRetry, onGiveUp, signal, wait = sleep }) {
  let attempt = 0;
  let finished = false;
  const parser = new EventStreamParser((ev) => {
    attempt = 0;
    if (onEvent(ev) === false) finished = true;
    return !finished;
  });
  while (!finished && !signal.aborted) {
    try {
      const body = await connect(parser.lastEventId);
      if (body === null) return;
      onConnected();
      parser.reset();
      await readEvents(body, parser);
      if (finished || signal.aborted) return;
      throw new Error("the stream closed early");
    } catch (e) {
      if (finished || signal.aborted) return;
      attempt++;
      if (attempt > MAX_ATTEMPTS) return onGiveUp(e);
      onRetry(e);
      await wait(reconnectDelay(attempt, parser.retry), signal);
    }
  }
}
