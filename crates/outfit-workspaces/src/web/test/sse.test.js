// The event-stream reader: the format's corners, on input cut at every byte, and the reconnects.
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventStreamParser, MAX_ATTEMPTS, keepReading, readEvents, reconnectDelay } from "../sse.js";

// Every line end the format allows, a comment, retry, id, a two-line data with UTF-8 of two and
// three bytes, an event without data (not dispatched), and a last event ended by "\r\r".
const STREAM =
  ": keep-alive\r\n" +
  "retry: 2500\n" +
  "event: progress\r\n" +
  "id: 7\r" +
  'data: {"a":1,\r\n' +
  'data:  "é":"↗"}\n' +
  "\r\n" +
  "data: plain\n\n" +
  "event: nothing\n\n" +
  "event: ready\ndata\ndata:last\r\r";
const EVENTS = [
  { event: "progress", data: '{"a":1,\n "é":"↗"}', id: "7" },
  { event: "message", data: "plain", id: "7" },
  { event: "ready", data: "\nlast", id: "7" },
];
const BYTES = new TextEncoder().encode(STREAM);

// A response body that gives `chunks` (Uint8Arrays) one read at a time.
function body(chunks) {
  const reader = {
    cancelled: false,
    read: async () => (chunks.length ? { done: false, value: chunks.shift() } : { done: true }),
    cancel: async () => { reader.cancelled = true; },
  };
  return { reader, getReader: () => reader };
}

async function read(chunks) {
  const events = [];
  const parser = new EventStreamParser((ev) => { events.push(ev); });
  const ended = await readEvents(body(chunks), parser);
  return { events, parser, ended };
}

test("events cut into two chunks at every byte read the same", async () => {
  for (let at = 0; at <= BYTES.length; at++) {
    const { events, parser, ended } = await read([BYTES.slice(0, at), BYTES.slice(at)]);
    assert.deepEqual(events, EVENTS, `cut at byte ${at}`);
    assert.equal(parser.retry, 2500, `cut at byte ${at}`);
    assert.equal(ended, true);
  }
});

test("events read one byte at a time read the same", async () => {
  const { events } = await read(Array.from(BYTES, (b) => Uint8Array.of(b)));
  assert.deepEqual(events, EVENTS);
});

test("text pushed in pieces cut at every two places reads the same", () => {
  for (let a = 0; a <= STREAM.length; a++) {
    for (let b = a; b <= STREAM.length; b++) {
      const events = [];
      const parser = new EventStreamParser((ev) => { events.push(ev); });
      parser.push(STREAM.slice(0, a));
      parser.push(STREAM.slice(a, b));
      parser.push(STREAM.slice(b));
      parser.end();
      assert.deepEqual(events, EVENTS, `cut at ${a} and ${b}`);
    }
  }
});

test("a CR at the end of a chunk and its LF in the next are one line end", () => {
  const events = [];
  const parser = new EventStreamParser((ev) => { events.push(ev.data); });
  parser.push("data: a\r");
  parser.push("\ndata: b\r");
  parser.push("\n\r");
  parser.push("\n");
  assert.deepEqual(events, ["a\nb"]);
});

test("an event without its blank line at the end of the stream is dropped", async () => {
  const { events } = await read([new TextEncoder().encode("data: done\n\ndata: half\n")]);
  assert.deepEqual(events.map((e) => e.data), ["done"]);
});

test("retry takes only digits, id without NUL, and unknown fields are ignored", () => {
  const events = [];
  const parser = new EventStreamParser((ev) => { events.push(ev); });
  parser.push("retry: 5s\nid: a\0b\nfoo: bar\nretry\nid: 9\ndata: x\n\n");
  assert.equal(parser.retry, null);
  assert.deepEqual(events, [{ event: "message", data: "x", id: "9" }]);
});

test("once onEvent says stop, nothing more is read and the body is cancelled", async () => {
  const events = [];
  const parser = new EventStreamParser((ev) => { events.push(ev.data); return false; });
  const b = body([new TextEncoder().encode("data: 1\n\ndata: 2\n\n")]);
  assert.equal(await readEvents(b, parser), false);
  assert.deepEqual(events, ["1"]);
  assert.equal(b.reader.cancelled, true);
});

test("the wait before a reconnect grows to 5 s, or is the server's retry", () => {
  assert.deepEqual([1, 2, 9, 10, 11].map((n) => reconnectDelay(n, null)), [500, 1000, 4500, 5000, 5000]);
  assert.equal(reconnectDelay(3, 200), 200);
});

// keepReading with `answers`, one per connection: a string is the stream's text, an Error a
// failed connection, null an answer dealt with. Records what it did.
async function follow(answers, { stopOn = "ready", abortAfter = Infinity } = {}) {
  const seen = { ids: [], events: [], waits: [], retries: 0, connected: 0, gaveUp: null };
  const controller = new AbortController();
  await keepReading({
    connect: async (lastEventId) => {
      seen.ids.push(lastEventId);
      if (seen.ids.length > abortAfter) controller.abort();
      const answer = answers.length ? answers.shift() : new Error("refused");
      if (answer instanceof Error) throw answer;
      return answer === null ? null : body([new TextEncoder().encode(answer)]);
    },
    onEvent: (ev) => { seen.events.push(ev.event); return ev.event !== stopOn; },
    onConnected: () => { seen.connected++; },
    onRetry: () => { seen.retries++; },
    onGiveUp: (e) => { seen.gaveUp = e.message; },
    signal: controller.signal,
    wait: async (ms) => { seen.waits.push(ms); },
  });
  return seen;
}

test("a stream that closes early is read again, with the last id, until its final event", async () => {
  const seen = await follow(["id: 3\nevent: progress\ndata: {}\n\n", "event: ready\ndata: {}\n\n", "data: never\n\n"]);
  assert.deepEqual(seen.events, ["progress", "ready"]);
  assert.deepEqual(seen.ids, ["", "3"]);
  assert.deepEqual(seen.waits, [500]);
  assert.equal(seen.connected, 2);
  assert.equal(seen.gaveUp, null);
});

test("the server's retry sets the wait before the next connection", async () => {
  const seen = await follow(["retry: 1234\ndata: {}\n\n", "event: ready\ndata: {}\n\n"]);
  assert.deepEqual(seen.waits, [1234]);
});

test("after MAX_ATTEMPTS failures in a row it gives up", async () => {
  const seen = await follow([]);
  assert.equal(seen.retries, MAX_ATTEMPTS);
  assert.equal(seen.ids.length, MAX_ATTEMPTS + 1);
  assert.deepEqual(seen.waits, [500, 1000, 1500, 2000, 2500, 3000, 3500, 4000]);
  assert.equal(seen.gaveUp, "refused");
});

test("an event starts the count of failures again", async () => {
  const failures = Array.from({ length: 5 }, () => new Error("down"));
  const seen = await follow([...failures, "data: {}\n\n", new Error("down"), "event: ready\ndata: {}\n\n"]);
  // Five failures; the event, then the close (the first failure again), and one more.
  assert.deepEqual(seen.waits, [500, 1000, 1500, 2000, 2500, 500, 1000]);
  assert.equal(seen.gaveUp, null);
  assert.deepEqual(seen.events, ["message", "ready"]);
});

test("an answer dealt with by connect ends the following without a retry", async () => {
  const seen = await follow([null]);
  assert.deepEqual(seen, { ids: [""], events: [], waits: [], retries: 0, connected: 0, gaveUp: null });
});

test("an abort ends the following", async () => {
  const seen = await follow([], { abortAfter: 2 });
  assert.equal(seen.ids.length, 3);
  assert.equal(seen.gaveUp, null);
});
