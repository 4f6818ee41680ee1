// BullMQ's side of the worker-throughput benchmark (bench/src/throughput.rs
// runs this and puts its numbers beside the Delayer Worker's): N jobs, all
// due at once (added before the worker starts), taken by one BullMQ Worker
// at the given concurrency with a no-op processor, each job removed on
// completion (as Delayer's ack deletes it).
//
//   node throughput.js REDIS_URL N CONCURRENCY
//
// Prints one JSON line on stdout: {"jobs": n, "completed": n,
// "start_ms": t, "end_ms": t} (wall-clock ms: from the worker's start to
// the n-th 'completed' event). Errors go to stderr; a failure exits 1.

'use strict';

const { Queue } = require('bullmq');
const { connectionFrom, positive, completeJobs } = require('./common');

const QUEUE = 'bench-throughput';
const BODY = { order: 1234567, act: 'close' };

function usage(msg) {
  process.stderr.write(`throughput.js: ${msg}\nusage: node throughput.js REDIS_URL N CONCURRENCY\n`);
  process.exit(2);
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length !== 3) usage(`expected 3 arguments, got ${argv.length}`);
  const connection = connectionFrom(argv[0], usage);
  const [n, concurrency] = argv.slice(1).map((v) => positive(v, usage));

  const queue = new Queue(QUEUE, { connection });
  await queue.waitUntilReady();
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let k = i; k < Math.min(i + 1000, n); k += 1) {
      jobs.push({ name: 'noop', data: { ...BODY, k }, opts: { removeOnComplete: true, removeOnFail: true } });
    }
    await queue.addBulk(jobs);
  }
  await queue.close();

  const start = Date.now();
  const { completed, end } = await completeJobs(QUEUE, connection, n, concurrency, 300000);
  return `{"jobs": ${n}, "completed": ${completed}, "start_ms": ${start}, "end_ms": ${end}}\n`;
}

main().then(
  (line) => process.stdout.write(line),
  (e) => {
    process.stderr.write(`throughput.js: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
