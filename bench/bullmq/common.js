// What throughput.js and lifecycle.js share: reading the Redis URL and
// counts from the command line, and one BullMQ Worker (no-op processor)
// run until it has completed n jobs.

'use strict';

const { Worker } = require('bullmq');

// The ioredis connection options for a redis:// URL, or usage() on a bad one.
function connectionFrom(arg, usage) {
  let url;
  try {
    url = new URL(arg);
  } catch (e) {
    usage(`${JSON.stringify(arg)} is not a URL`);
  }
  return { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
}

// A whole number > 0 from the command line, or usage().
function positive(v, usage) {
  const x = Number(v);
  if (!Number.isInteger(x) || x <= 0) usage(`${JSON.stringify(v)} is not a whole number > 0`);
  return x;
}

// Runs a Worker on `queue` until n jobs completed (or timeoutMs passed);
// returns {completed, end} (end: Date.now() at the n-th 'completed' event).
async function completeJobs(queue, connection, n, concurrency, timeoutMs) {
  let completed = 0;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const worker = new Worker(queue, async () => {}, { connection, concurrency });
  worker.on('error', (e) => process.stderr.write(`worker error: ${e.message}\n`));
  worker.on('completed', () => {
    completed += 1;
    if (completed === n) resolveDone();
  });
  const timeout = setTimeout(resolveDone, timeoutMs);
  await done;
  const end = Date.now();
  clearTimeout(timeout);
  await worker.close();
  return { completed, end };
}

module.exports = { connectionFrom, positive, completeJobs };
