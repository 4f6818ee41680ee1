// BullMQ's side of the lateness benchmark: the peer users would pick instead
// of Delayer, measured the same way on the same Redis (bench/src/bullmq.rs
// runs this script and puts its numbers beside Delayer's).
//
// A Queue adds jobs at a steady rate, each with a delay drawn uniformly from
// [min, max] ms (`queue.add(name, data, {delay})`); one Worker at
// concurrency 50 takes them. A job's lateness is its processing start minus
// (job.timestamp + job.opts.delay): BullMQ's own due time, job.timestamp
// being Date.now() when the job was created. The Queue runs in a worker
// thread, so adding never holds up the Worker's event loop (as in an app,
// where producers and workers are separate processes).
//
//   node lateness.js REDIS_URL RATE SECS DELAY_MIN_MS DELAY_MAX_MS
//
// Prints one JSON line on stdout: {"pushed": n, "consumed": n,
// "push_secs": s, "clock_drift_ms": x, "late_ms": [...], "delay_ms": [...]}
// (late_ms[i] and delay_ms[i] belong to the same job, in processing order).
// Progress and errors go to stderr; a failure exits 1.

'use strict';

const { performance } = require('node:perf_hooks');
const { Worker: Thread, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { Queue, Worker } = require('bullmq');

const CONCURRENCY = 50;
const QUEUE = 'bench-lateness';

function usage(msg) {
  process.stderr.write(`lateness.js: ${msg}\nusage: node lateness.js REDIS_URL RATE SECS DELAY_MIN_MS DELAY_MAX_MS\n`);
  process.exit(2);
}

function parseArgs(argv) {
  if (argv.length !== 5) usage(`expected 5 arguments, got ${argv.length}`);
  const [url, ...nums] = argv;
  const [rate, secs, min, max] = nums.map((v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) usage(`${JSON.stringify(v)} is not a whole number >= 0`);
    return n;
  });
  if (rate === 0 || secs === 0) usage('RATE and SECS must be > 0');
  if (min > max) usage('DELAY_MIN_MS must be <= DELAY_MAX_MS');
  let parsed;
  try {
    parsed = new URL(url);
  } catch (e) {
    usage(`${JSON.stringify(url)} is not a URL`);
  }
  return { host: parsed.hostname, port: Number(parsed.port || 6379), rate, secs, min, max };
}

function connection(o) {
  return { host: o.host, port: o.port, maxRetriesPerRequest: null };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Date.now() has whole milliseconds; performance.now() is finer but is a
// monotonic clock, which drifts from the wall clock (NTP slewing: up to
// 0.13 ms a second seen here, not at a steady rate). So each job's start is
// taken on both clocks; d - p (Date.now() minus performance.now()) is the
// offset between them rounded down by the sub-millisecond phase of that
// moment, which is random from job to job. The largest d - p among the jobs
// within WINDOW_MS of a job is its offset to a few microseconds (hundreds
// of random phases; the drift within the window is as small), which puts
// its start on the wall clock job.timestamp uses, to well under 0.1 ms.
const WINDOW_MS = 250;

// The exact offset, taken the moment Date.now() ticks over: before and
// after the run, as two more points for the windows at either end.
function wallOffset() {
  const d0 = Date.now();
  let d;
  while ((d = Date.now()) === d0) {
    // spin: at most 1 ms, twice per run, outside the measurement
  }
  const p = performance.now();
  return { p, offset: d - p };
}

// The producer thread: job i is added at start + i / rate, without waiting
// for the previous add (ioredis pipelines them), as a busy app would.
// Posts {pushed, push_secs} when every add has returned, or {error}.
async function produce(o) {
  const queue = new Queue(QUEUE, { connection: connection(o) });
  await queue.waitUntilReady();
  const total = o.rate * o.secs;
  const pending = new Set();
  let failed = null;
  const start = performance.now();
  let i = 0;
  while (i < total) {
    const elapsed = performance.now() - start;
    while (i < total && (i * 1000) / o.rate <= elapsed) {
      const delay = o.min + Math.floor(Math.random() * (o.max - o.min + 1));
      const p = queue.add('late', { i }, { delay, removeOnComplete: true, removeOnFail: true });
      pending.add(p);
      p.then(
        () => pending.delete(p),
        (e) => {
          failed = failed || e;
          pending.delete(p);
        },
      );
      i += 1;
    }
    if (failed) throw failed;
    await sleep(Math.max(0, Math.floor((i * 1000) / o.rate - (performance.now() - start))));
  }
  await Promise.all(pending);
  if (failed) throw failed;
  const pushSecs = (performance.now() - start) / 1000;
  await queue.close();
  return { pushed: total, push_secs: pushSecs };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const total = o.rate * o.secs;
  // Per processed job: its processing start (performance.now()), its due
  // time (job.timestamp + delay, wall ms) and its delay.
  const started = new Float64Array(total);
  const coarse = new Float64Array(total); // Date.now() - started, see WINDOW_MS
  const due = new Float64Array(total);
  const delays = new Int32Array(total);
  let consumed = 0;

  const worker = new Worker(
    QUEUE,
    async (job) => {
      if (consumed < total) {
        const p = performance.now();
        started[consumed] = p;
        coarse[consumed] = Date.now() - p;
        due[consumed] = job.timestamp + job.opts.delay;
        delays[consumed] = job.opts.delay;
      }
      consumed += 1;
    },
    { connection: connection(o), concurrency: CONCURRENCY },
  );
  worker.on('error', (e) => process.stderr.write(`worker error: ${e.message}\n`));
  await worker.waitUntilReady();
  // Let the worker reach its blocking wait before the first job.
  await sleep(300);

  const before = wallOffset();
  const produced = await new Promise((resolve, reject) => {
    const thread = new Thread(__filename, { workerData: o });
    thread.once('message', (m) => (m.error ? reject(new Error(`producer: ${m.error}`)) : resolve(m)));
    thread.once('error', reject);
  });

  // Wait for the last jobs to fall due and be processed.
  const deadline = performance.now() + o.max + 10000;
  while (consumed < total && performance.now() < deadline) {
    await sleep(20);
  }
  const after = wallOffset();
  await worker.close();

  const n = Math.min(consumed, total);
  const offsets = windowMax(started.subarray(0, n), coarse.subarray(0, n), before, after);
  const late = new Float64Array(n);
  for (let k = 0; k < n; k += 1) {
    late[k] = started[k] + offsets[k] - due[k];
  }
  const fmt = (a) => Array.from(a, (x) => Math.round(x * 1000) / 1000).join(',');
  return (
    `{"pushed": ${produced.pushed}, "consumed": ${consumed}, "push_secs": ${produced.push_secs.toFixed(3)}, ` +
    `"clock_drift_ms": ${(after.offset - before.offset).toFixed(3)}, ` +
    `"late_ms": [${fmt(late)}], "delay_ms": [${fmt(delays.subarray(0, n))}]}\n`
  );
}

// For each job k: the largest offset among the points within WINDOW_MS of
// started[k], the points being the jobs (started, coarse: in increasing
// started order, the processor runs on one event loop) and the two exact
// measurements. A sliding window with a deque of candidates: O(n).
function windowMax(started, coarse, before, after) {
  const n = started.length;
  const P = [before.p, ...started, after.p];
  const X = [before.offset, ...coarse, after.offset];
  const out = new Float64Array(n);
  const deque = []; // indices into P / X, X decreasing
  let head = 0;
  let right = 0;
  for (let k = 0; k < n; k += 1) {
    const at = started[k];
    while (right < P.length && P[right] <= at + WINDOW_MS) {
      while (deque.length > head && X[deque[deque.length - 1]] <= X[right]) deque.pop();
      deque.push(right);
      right += 1;
    }
    while (P[deque[head]] < at - WINDOW_MS) head += 1;
    out[k] = X[deque[head]];
  }
  return out;
}

if (isMainThread) {
  main().then(
    // Exit only once the (large, piped, so asynchronous) line is written.
    (line) => process.stdout.write(line, () => process.exit(0)),
    (e) => {
      process.stderr.write(`lateness.js: ${e && e.stack ? e.stack : e}\n`);
      process.exit(1);
    },
  );
} else {
  produce(workerData).then(
    (m) => parentPort.postMessage(m),
    (e) => parentPort.postMessage({ error: String(e && e.stack ? e.stack : e) }),
  );
}
