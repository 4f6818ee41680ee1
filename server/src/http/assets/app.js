// The dashboard: reads the JSON API with the sign-in cookie and draws it.
// Each view has its URL (the part after #), so a view can be linked to:
//   #/                                  topics and the chart
//   #/topics/<topic>/<tab>[?page=|?cursor=]  a topic's scheduled, ready, reserved or dead jobs
//   #/jobs/<topic>/<id>                 one job: what is known, its body, actions
//   #/search?id=<id>                    the topics holding a job of that id
// Names in URLs are percent-encoded bytes, as in the API's paths (util.js).
"use strict";

let refreshing = null; // the overview's timer

function showView(name) {
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + name;
}

// The view the URL names.
function route() {
  clearInterval(refreshing);
  refreshing = null;
  const hash = window.location.hash.replace(/^#/, "");
  const [path, query] = hash.split(/\?(.*)/s);
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter((p) => p !== "").map(canonicalSeg);
  const fail = (e) => say(e.message, true);
  if (parts[0] === "topics" && parts.length >= 2 && addressable(parts[1])) {
    const tab = TABS.includes(parts[2]) ? parts[2] : "scheduled";
    showView("topic");
    showTopic(parts[1], tab, params).catch(fail);
  } else if (parts[0] === "jobs" && parts.length === 3) {
    showView("job");
    showJob(parts[1], parts[2]).catch(fail);
  } else if (parts[0] === "search") {
    showView("search");
    search(params.get("id") || "").catch(fail);
  } else {
    showView("overview");
    const tick = () => refreshOverview().catch((e) => { $("status").textContent = "error: " + e.message; });
    tick();
    refreshing = setInterval(tick, 2000);
  }
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

// Topics, their numbers, and the chart.
async function refreshOverview() {
  const seconds = Number($("range").value);
  const [stats, recent, history] = await Promise.all([
    api("GET", "/v1/stats"),
    api("GET", "/v1/history?seconds=60&step=1"),
    api("GET", "/v1/history?seconds=" + seconds),
  ]);
  showEviction(stats.redis || {});
  const perTopic = recent.topics || {};
  const body = $("topics").tBodies[0];
  body.replaceChildren();
  for (const t of stats.topics) {
    const row = el("tr", null, "clickable");
    row.dataset.topic = t.topic;
    const seg = segOfText(t.topic);
    const name = cell("topic", link(t.topic, "#/topics/" + seg + "/scheduled"));
    name.append(...flowBadges(t));
    row.append(name);
    TABS.forEach((tab) => row.append(cell(tab, link(num(t[tab]), "#/topics/" + seg + "/" + tab), "num")));
    const r = perTopic[t.topic];
    row.append(cell("moved, last minute", r ? r.moved_last_minute : 0, "num"));
    row.append(cell("lateness, last minute", r ? r.lateness_max_ms + " ms" : "", "num"));
    const actions = cell("", undefined, "write actions");
    actions.append(...flowButtons(seg, t));
    row.append(actions);
    row.dataset.paused = t.paused ? "true" : "false";
    row.addEventListener("click", (e) => {
      if (!e.target.closest("a, button")) window.location.hash = "#/topics/" + seg + "/scheduled";
    });
    body.append(row);
  }
  $("topics-note").textContent = stats.topics.length ? "" : "No topics yet: push a job.";
  const names = $("topic-names");
  if (names.children.length !== stats.topics.length) {
    names.replaceChildren(...stats.topics.map((t) => { const o = el("option"); o.value = t.topic; return o; }));
  }
  drawChart(history, seconds);
  $("status").textContent = "updated " + new Date().toLocaleTimeString();
}

// A topic's flow control (PROTOCOL.md, "Flow control (pause)" and "Rate
// limits"): how long it has been paused, its rate limit, and its due jobs
// held back (by the pause, the limit, or a backlog still draining).
function flowBadges(t) {
  const out = [];
  if (t.paused) {
    const since = t.paused_since;
    const badge = el("span", since === null || since === undefined ? "paused" : "paused " + ago(since), "badge paused");
    badge.title = since === null || since === undefined ? "paused: nothing of it is handed out or made ready"
      : "paused since " + when(since) + ": nothing of it is handed out or made ready";
    out.push(badge);
  }
  const limit = t.rate_limit;
  if (limit) {
    const [n, unit] = rateParts(limit.per_second);
    const badge = el("span", n + "/" + unit, "badge limited");
    badge.title = "rate limit: " + n + (n === "1" ? " job/" : " jobs/") + unit + ", burst " + limit.burst +
      " (jobs over it wait, held)";
    out.push(badge);
  }
  if (t.held > 0) {
    const held = el("span", t.held + " held", "badge held");
    held.title = t.paused ? "due jobs the pause holds back: ready once resumed" + (limit ? ", at the limit's pace" : "")
      : limit ? "due jobs over the rate limit: ready at its pace"
      : "due jobs held back before: becoming ready at full speed";
    out.push(held);
  }
  return out;
}

// A rate in the unit that makes it 1 or more where it can, as `delayer
// stats` prints it (jobview.rs, rate_text): [50, "s"], [30, "min"] for 0.5
// a second, [1, "h"] for 1/3600; to six decimals.
function rateParts(perSecond) {
  const [n, unit] = perSecond >= 1 ? [perSecond, "s"] : perSecond * 60 >= 1 ? [perSecond * 60, "min"]
    : [perSecond * 3600, "h"];
  return [String(Math.round(n * 1e6) / 1e6), unit];
}

// Pause (after a confirmation) or Resume, and Clear limit when the topic has
// one; then the overview is drawn again.
function flowButtons(seg, t) {
  const out = [];
  if (t.paused) {
    out.push(button("Resume", "resume", () => act(null, () => api("POST", "/v1/topics/" + seg + "/resume"),
      (r) => r.changed ? "Resumed " + t.topic + "." : t.topic + " was running already.")));
  } else {
    out.push(button("Pause", "pause", () => act("Pause " + t.topic + "? Workers get none of its jobs and " +
        "none becomes ready until it is resumed; pushes go on.", () => api("POST", "/v1/topics/" + seg + "/pause"),
      (r) => r.changed ? "Paused " + t.topic + "." : t.topic + " was paused already.")));
  }
  if (t.rate_limit) {
    out.push(button("Clear limit", "unlimit", () => act(null, () => api("DELETE", "/v1/topics/" + seg + "/limit"),
      (r) => r.cleared ? "Cleared the rate limit of " + t.topic + "." : t.topic + " had no rate limit.")));
  }
  return out;
}

// One job: what is known of it (the rows of `delayer job`), its body, and
// what may be done with it in its state.
async function showJob(topicSeg, idSegment) {
  const out = $("job");
  out.replaceChildren();
  // The state shown is this lookup's: never the last one's after a failure.
  delete out.dataset.state;
  $("job-actions").replaceChildren();
  $("job-body").hidden = $("job-body-title").hidden = true;
  $("job-title").textContent = segText(idSegment) + " of " + segText(topicSeg);
  if (!addressable(topicSeg) || !addressable(idSegment)) {
    out.append(el("dt", "error"), el("dd", "a name of . or .. cannot be put in a URL: use `delayer job`", "error"));
    out.dataset.state = "error";
    return;
  }
  let job;
  try {
    job = await api("GET", "/v1/topics/" + topicSeg + "/jobs/" + idSegment + "?body=true");
  } catch (e) {
    out.append(el("dt", "error"), el("dd", e.message, "error"));
    out.dataset.state = "error";
    return;
  }
  const rows = [["state", job.state], ["topic", job.topic], ["id", idText(job)]];
  if (job.due !== null && job.due !== undefined) rows.push(["due", when(job.due) + " (" + inSeconds(job.due) + ")"]);
  if (job.deadline !== null && job.deadline !== undefined) rows.push(["deadline", when(job.deadline)]);
  if (job.dead_at !== null && job.dead_at !== undefined) rows.push(["died", when(job.dead_at)]);
  for (const key of ["body_size", "attempts", "max_attempts", "dead_reason", "last_error", "traceparent", "flow"]) {
    if (job[key] !== null && job[key] !== undefined && job[key] !== "") rows.push([key.replace("_", " "), job[key]]);
  }
  for (const [k, v] of rows) out.append(el("dt", k), el("dd", v, k === "last error" ? "error-text" : undefined));
  out.dataset.state = job.state;
  if (job.body !== undefined || job.body_base64 !== undefined) {
    $("job-body").textContent = bodyText(job, true);
    $("job-body-note").textContent = job.body_truncated ? "(the first 64 KiB of " + job.body_size + " bytes)" : "";
    $("job-body").hidden = $("job-body-title").hidden = false;
  }
  jobActions(topicSeg, job);
}

function jobActions(topicSeg, job) {
  const box = $("job-actions");
  const state = job.state;
  if (state === "dead") {
    box.append(...deadButtons(topicSeg, job));
  }
  if (state === "scheduled") {
    const delay = el("input", null, "delay");
    delay.type = "number";
    delay.min = "0";
    delay.step = "any";
    delay.placeholder = "seconds";
    delay.setAttribute("aria-label", "reschedule in seconds");
    box.append(button("Run now", "run", () => runNow(topicSeg, job)), delay,
      button("Reschedule", "reschedule", () => reschedule(topicSeg, job, delay.value)));
  }
  if (["scheduled", "ready", "reserved"].includes(state)) {
    box.append(button("Remove", "danger remove", () => removeJob(topicSeg, job)));
  }
}

// Actions, each after a confirmation (none asked when `question` is null);
// then the view is drawn again.
async function act(question, request, done) {
  if (!canWrite() || (question !== null && !window.confirm(question))) return;
  try {
    say(done(await request()));
  } catch (e) {
    say(e.message, true);
  }
  route();
}
function jobPath(topicSeg, job) {
  return "/v1/topics/" + topicSeg + "/jobs/" + idSeg(job);
}
function runNow(topicSeg, job) {
  return act("Run " + idText(job) + " now?", () => api("POST", jobPath(topicSeg, job) + "/reschedule", { delay: 0 }),
    (r) => r.due === null ? idText(job) + " was not waiting any more." : "Running " + idText(job) + " now.");
}
function reschedule(topicSeg, job, value) {
  const seconds = Number(value);
  if (value === "" || !Number.isFinite(seconds) || seconds < 0) {
    say("Give the delay in seconds, 0 or more.", true);
    return;
  }
  return act("Reschedule " + idText(job) + " to run in " + seconds + " s?",
    () => api("POST", jobPath(topicSeg, job) + "/reschedule", { delay: seconds }),
    (r) => r.due === null ? idText(job) + " was not waiting any more."
      : "Rescheduled " + idText(job) + " to " + when(r.due) + ".");
}
function removeJob(topicSeg, job) {
  return act("Remove " + idText(job) + " for good?", () => api("DELETE", jobPath(topicSeg, job)),
    (r) => r.removed ? "Removed " + idText(job) + "." : idText(job) + " was gone already.");
}
function deadAction(topicSeg, action, which, question) {
  return act(question, () => api("POST", "/v1/topics/" + topicSeg + "/dead/" + action, which),
    (r) => action === "requeue" ? "Requeued " + r.requeued + "." : "Purged " + r.purged + ".");
}

// Every topic's job of this id (in the classic layout ids are global: one
// at most; in the per-topic layout each topic may hold one).
async function search(id) {
  $("search-id").textContent = id;
  const list = $("search-results");
  list.replaceChildren(el("li", "looking…", "muted"));
  if (id === "") { list.replaceChildren(el("li", "Give an id.", "muted")); return; }
  const stats = await api("GET", "/v1/stats");
  const found = [];
  const topics = stats.topics.map((t) => t.topic);
  for (let i = 0; i < topics.length; i += 8) {
    const answers = await Promise.all(topics.slice(i, i + 8).map((t) =>
      api("GET", "/v1/topics/" + segOfText(t) + "/jobs/" + segOfText(id)).then((job) => [t, job], () => [t, null])));
    for (const [t, job] of answers) if (job && job.state !== "unknown") found.push([t, job]);
  }
  if (found.length === 1) {
    window.location.replace("#/jobs/" + segOfText(found[0][0]) + "/" + segOfText(id));
    return;
  }
  list.replaceChildren(...found.map(([t, job]) => {
    const li = el("li");
    li.append(link(t, "#/jobs/" + segOfText(t) + "/" + segOfText(id)), el("span", " " + job.state, "muted"));
    return li;
  }));
  if (!found.length) {
    list.append(el("li", "No topic holds a job with this id (done, removed, expired or never pushed).", "muted"));
  }
}

// The header's form: a topic given opens the job, else the search.
function find(event) {
  event.preventDefault();
  const id = $("find-id").value, topic = $("find-topic").value.trim();
  const hash = topic ? "#/jobs/" + segOfText(topic) + "/" + segOfText(id) : "#/search?id=" + segOfText(id);
  if (window.location.hash === hash) route(); else window.location.hash = hash;
}

function start() {
  $("find").addEventListener("submit", find);
  $("range").addEventListener("change", route);
  $("list-refresh").addEventListener("click", route);
  startBulk();
  window.addEventListener("hashchange", () => { say(""); route(); });
  route();
  // The status line says the app runs, whatever the view.
  if (!$("status").textContent) $("status").textContent = "started " + new Date().toLocaleTimeString();
}

document.addEventListener("DOMContentLoaded", start);
