// The dashboard: reads the JSON API with the sign-in cookie and draws it.
// Everything from the API (topics, ids, bodies) is shown with textContent,
// never parsed as HTML: job bodies are arbitrary bytes.
"use strict";

const $ = (id) => document.getElementById(id);
const canWrite = () => document.body.dataset.access === "full";
let selected = null;      // the topic shown in the lower section
let scheduledCursor = null;

// The API with the cookie; the header marks our own requests (CSRF guard),
// and every write says JSON, with a body or without (the server's rule).
async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "x-delayer-dashboard": "1" } };
  if (method !== "GET") init.headers["content-type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) { window.location.assign("/"); }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.statusText;
    throw new Error(message);
  }
  return data;
}

const enc = encodeURIComponent;
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
function when(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "";
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace("Z", " UTC");
}
function inSeconds(seconds) {
  const d = seconds - Date.now() / 1000;
  const abs = Math.abs(d);
  const text = abs < 120 ? abs.toFixed(1) + " s" : abs < 7200 ? (abs / 60).toFixed(1) + " min" : (abs / 3600).toFixed(1) + " h";
  return d >= 0 ? "in " + text : text + " ago";
}
// A job's id: text as is; one that is not UTF-8 (the API's id_base64) as
// base64, and named back to the API by its bytes.
function idText(job) {
  return job.id !== undefined ? job.id : "base64:" + job.id_base64;
}
function idsOf(job) {
  return job.id !== undefined ? { ids: [job.id] } : { ids_base64: [job.id_base64] };
}
// A body: text as is, anything else as hex. Never HTML.
function bodyText(job) {
  if (job.body !== undefined) return job.body;
  if (job.body_base64 === undefined) return "";
  const bytes = atob(job.body_base64);
  let hex = "";
  for (let i = 0; i < bytes.length; i++) hex += bytes.charCodeAt(i).toString(16).padStart(2, "0") + " ";
  return "hex: " + hex.trim();
}
function say(text, isError) {
  const m = $("message");
  m.textContent = text;
  m.className = isError ? "error" : "muted";
}
function num(value) {
  return value === null || value === undefined ? "?" : String(value);
}

// A Redis that may evict keys deletes jobs undelivered: say so on top.
function showEviction(redis) {
  const banner = $("eviction");
  const unsafe = redis.eviction_safe === false;
  banner.hidden = !unsafe;
  banner.textContent = unsafe
    ? "Redis may delete jobs undelivered: its maxmemory-policy is " + redis.maxmemory_policy +
      ". Fix: CONFIG SET maxmemory-policy noeviction, and the same in redis.conf."
    : "";
}

// Topics and their numbers.
async function refreshTopics() {
  const [stats, history] = await Promise.all([api("GET", "/v1/stats"), api("GET", "/v1/history?seconds=120")]);
  showEviction(stats.redis || {});
  const recent = history.topics || {};
  const body = $("topics").tBodies[0];
  body.replaceChildren();
  const names = [];
  for (const t of stats.topics) {
    names.push(t.topic);
    const row = el("tr", null, "clickable");
    row.dataset.topic = t.topic;
    row.append(el("td", t.topic));
    for (const v of [t.scheduled, t.ready, t.reserved, t.dead]) row.append(el("td", num(v), "num"));
    const r = recent[t.topic];
    row.append(el("td", r ? r.moved_last_minute : 0, "num"));
    row.append(el("td", r ? r.lateness_max_ms + " ms" : "", "num"));
    row.addEventListener("click", () => selectTopic(t.topic));
    body.append(row);
  }
  $("topics-note").textContent = names.length ? "" : "No topics yet: push a job.";
  const select = $("topic");
  const current = Array.from(select.options).map((o) => o.value).join("\n");
  if (current !== names.join("\n")) {
    select.replaceChildren(...names.map((n) => { const o = el("option", n); o.value = n; return o; }));
  }
  if (selected === null && names.length) selectTopic(names[0]);
  else if (selected !== null) select.value = selected;
  drawChart(history.samples || []);
  $("status").textContent = "updated " + new Date().toLocaleTimeString();
}

// Moved per second as bars, the most lateness of each second as a line.
function drawChart(samples) {
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 30;
  ctx.clearRect(0, 0, w, h);
  const maxMoved = Math.max(1, ...samples.map((s) => s.moved));
  const maxLate = Math.max(1, ...samples.map((s) => s.lateness_max_ms));
  const step = (w - 2 * pad) / Math.max(1, samples.length);
  ctx.fillStyle = "#4a7bd0";
  samples.forEach((s, i) => {
    const bar = (s.moved / maxMoved) * (h - 2 * pad);
    ctx.fillRect(pad + i * step, h - pad - bar, Math.max(1, step - 1), bar);
  });
  ctx.strokeStyle = "#d0704a";
  ctx.beginPath();
  samples.forEach((s, i) => {
    const y = h - pad - (s.lateness_max_ms / maxLate) * (h - 2 * pad);
    if (i === 0) ctx.moveTo(pad + i * step, y); else ctx.lineTo(pad + i * step, y);
  });
  ctx.stroke();
  ctx.fillStyle = "#6b7580";
  ctx.font = "11px sans-serif";
  ctx.fillText(maxMoved + "/s", 2, pad - 4);
  ctx.fillText(maxLate + " ms", w - pad - 30, pad - 4);
  ctx.fillText("-2 min", pad, h - 8);
  ctx.fillText("now", w - pad - 20, h - 8);
  const total = samples.reduce((a, s) => a + s.moved, 0);
  $("chart-summary").textContent = " " + total + " moved in the last " + samples.length + " s";
}

function selectTopic(topic) {
  selected = topic;
  $("topic").value = topic;
  scheduledCursor = null;
  $("scheduled").tBodies[0].replaceChildren();
  loadScheduled().catch((e) => say(e.message, true));
  loadDead().catch((e) => say(e.message, true));
}

async function loadScheduled() {
  if (selected === null) return;
  const topic = selected;
  const body = $("scheduled").tBodies[0];
  // A page may be short (the listing examines a bounded part of the pool per
  // call): keep asking until 50 jobs or the end.
  let shown = 0;
  for (let calls = 0; calls < 20 && shown < 50; calls++) {
    let path = "/v1/topics/" + enc(topic) + "/jobs?state=scheduled&count=" + (50 - shown);
    if (scheduledCursor !== null) path += "&cursor=" + scheduledCursor;
    const page = await api("GET", path);
    if (topic !== selected) return;
    for (const job of page.items) {
      const row = el("tr");
      row.append(el("td", idText(job)), el("td", when(job.due)), el("td", inSeconds(job.due)));
      body.append(row);
      shown++;
    }
    scheduledCursor = page.next;
    if (scheduledCursor === null) break;
  }
  $("scheduled-more").hidden = scheduledCursor === null;
}

async function loadDead() {
  if (selected === null) return;
  const page = await api("GET", "/v1/topics/" + enc(selected) + "/dead?count=100");
  const body = $("dead").tBodies[0];
  body.replaceChildren();
  for (const job of page.dead) {
    const row = el("tr");
    row.dataset.id = idText(job);
    row.append(el("td", idText(job)), el("td", job.reason), el("td", job.attempts, "num"), el("td", when(job.dead_at)));
    row.append(el("td", bodyText(job), "body"));
    const actions = el("td", null, "write");
    const requeue = el("button", "Requeue", "requeue");
    requeue.addEventListener("click", () => act("requeue", idsOf(job), "Requeue " + idText(job) + "?"));
    const purge = el("button", "Purge", "danger purge");
    purge.addEventListener("click", () => act("purge", idsOf(job), "Purge " + idText(job) + " for good?"));
    actions.append(requeue, purge);
    row.append(actions);
    body.append(row);
  }
  if (!page.dead.length) {
    const row = el("tr");
    row.append(el("td", "No dead letters.", "muted"));
    body.append(row);
  }
}

// Requeue or purge dead letters, after a confirmation.
async function act(action, which, question) {
  if (!canWrite() || selected === null) return;
  if (!window.confirm(question)) return;
  try {
    const result = await api("POST", "/v1/topics/" + enc(selected) + "/dead/" + action, which);
    say(action === "requeue" ? "Requeued " + result.requeued + "." : "Purged " + result.purged + ".");
  } catch (e) {
    say(e.message, true);
  }
  await loadDead().catch((e) => say(e.message, true));
  await refreshTopics().catch((e) => say(e.message, true));
}

// One job by id: its state and what is known of it.
async function findJob(event) {
  event.preventDefault();
  const topic = $("find-topic").value, id = $("find-id").value;
  const out = $("job");
  out.replaceChildren();
  // The state shown is this search's: never the last one's after a failure.
  delete out.dataset.state;
  try {
    const job = await api("GET", "/v1/topics/" + enc(topic) + "/jobs/" + enc(id));
    const rows = [["state", job.state], ["topic", job.topic], ["id", idText(job)]];
    if (job.due !== null && job.due !== undefined) rows.push(["due", when(job.due) + " (" + inSeconds(job.due) + ")"]);
    if (job.deadline !== null && job.deadline !== undefined) rows.push(["deadline", when(job.deadline)]);
    if (job.dead_at !== null && job.dead_at !== undefined) rows.push(["died", when(job.dead_at)]);
    for (const key of ["body_size", "attempts", "max_attempts", "dead_reason", "last_error", "traceparent"]) {
      if (job[key] !== null && job[key] !== undefined && job[key] !== "") rows.push([key.replace("_", " "), job[key]]);
    }
    for (const [k, v] of rows) out.append(el("dt", k), el("dd", v));
    out.dataset.state = job.state;
  } catch (e) {
    out.append(el("dt", "error"), el("dd", e.message, "error"));
    out.dataset.state = "error";
  }
}

function start() {
  $("find").addEventListener("submit", findJob);
  $("topic").addEventListener("change", () => selectTopic($("topic").value));
  $("scheduled-more").addEventListener("click", () => loadScheduled().catch((e) => say(e.message, true)));
  $("requeue-all").addEventListener("click", () => act("requeue", { all: true }, "Requeue every dead letter of " + selected + "?"));
  $("purge-all").addEventListener("click", () => act("purge", { all: true }, "Purge every dead letter of " + selected + " for good?"));
  const tick = () => refreshTopics().catch((e) => { $("status").textContent = "error: " + e.message; });
  tick();
  setInterval(tick, 2000);
}

document.addEventListener("DOMContentLoaded", start);
