// BullMQ's side of the lifecycle-cost table (bench/lifecycle_cost.py runs
// this once per phase, resetting and reading Redis's INFO commandstats around
// each run): the same jobs as Delayer's (data whose JSON is 32 bytes), each
// added with a delay, so it goes through BullMQ's delayed set as every
// Delayer job goes through the pool.
//
//   node lifecycle.js REDIS_URL add N          N x queue.add(..., {delay: 1}), one after the other
//   node lifecycle.js REDIS_URL addbulk N      queue.addBulk of 1000 jobs at a time, delay 1 ms
//   node lifecycle.js REDIS_URL pending N      queue.addBulk as above, delay 1 h (memory per pending job)
//   node lifecycle.js REDIS_URL work N         one Worker, concurrency 100, no-op processor,
//                                              until N jobs completed (removeOnComplete)
//
// Prints one JSON line on stdout: {"phase": p, "jobs": n, "secs": s}.
// Errors go to stderr; a failure exits 1.

'use strict';

const { Queue } = require('bullmq');
const { connectionFrom, positive, completeJobs } = require('./common');

const QUEUE = 'bench-lifecycle';
// JSON.stringify of this is 32 bytes, as Delayer's bodies in the same run.
const DATA = { order: 12345678, act: 'close' };
const OPTS = { removeOnComplete: true, removeOnFail: true };
const CONCURRENCY = 100;

function usage(msg) {
  process.stderr.write(`lifecycle.js: ${msg}\nusage: node lifecycle.js REDIS_URL add|addbulk|pending|work N\n`);
  process.exit(2);
}

async function add(queue, n, delay, bulk) {
  if (!bulk) {
    for (let i = 0; i < n; i += 1) await queue.add('noop', DATA, { ...OPTS, delay });
    return;
  }
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let k = i; k < Math.min(i + 1000, n); k += 1) jobs.push({ name: 'noop', data: DATA, opts: { ...OPTS, delay } });
    await queue.addBulk(jobs);
  }
}

async function work(connection, n) {
  const { completed } = await completeJobs(QUEUE, connection, n, CONCURRENCY, 600000);
  if (completed !== n) throw new Error(`completed ${completed} of ${n} jobs`);
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length !== 3) usage(`expected 3 arguments, got ${argv.length}`);
  const connection = connectionFrom(argv[0], usage);
  const [phase, count] = argv.slice(1);
  const n = positive(count, usage);
  const start = Date.now();
  if (phase === 'work') {
    await work(connection, n);
  } else if (['add', 'addbulk', 'pending'].includes(phase)) {
    const queue = new Queue(QUEUE, { connection });
    await queue.waitUntilReady();
    await add(queue, n, phase === 'pending' ? 3600000 : 1, phase !== 'add');
    await queue.close();
  } else {
    usage(`unknown phase ${JSON.stringify(phase)}`);
  }
  return `{"phase": "${phase}", "jobs": ${n}, "secs": ${(Date.now() - start) / 1e3}}\n`;
}

main().then(
  (line) => process.stdout.write(line),
  (e) => {
    process.stderr.write(`lifecycle.js: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
