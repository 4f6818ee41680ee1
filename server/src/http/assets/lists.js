// A topic's page: tabs for its scheduled, ready, reserved and dead jobs,
// each paged to the end. Scheduled, ready and reserved page by the API's
// cursor (`?cursor=` in the URL); dead letters by page number (`?page=`),
// with the list's total. Every page has its URL, so a deep link opens it.
"use strict";

const PAGE = 50;
const TABS = ["scheduled", "ready", "reserved", "dead"];
// The cursors passed on the way to this page (Previous), per topic and tab.
const trail = { key: "", cursors: [] };

function listUrl(topicSeg, tab, params) {
  const shown = ([k, v]) => v !== null && v !== undefined && !(k === "cursor" && v === 0) && !(k === "page" && v === 1);
  const query = Object.entries(params || {}).filter(shown)
    .map(([k, v]) => k + "=" + v).join("&");
  return "#/topics/" + topicSeg + "/" + tab + (query ? "?" + query : "");
}

function setPager(first, prev, info, next) {
  for (const [id, hash] of [["page-first", first], ["page-prev", prev], ["page-next", next]]) {
    const a = $(id);
    a.hidden = hash === null;
    if (hash !== null) a.href = hash;
  }
  $("page-info").textContent = info;
}

function header(cells) {
  const row = el("tr");
  for (const c of cells) row.append(el("th", c));
  $("list").tHead.replaceChildren(row);
}

// A table cell with its column's name, shown beside it on a narrow screen.
function cell(label, content, cls) {
  const td = el("td", null, cls);
  td.dataset.label = label;
  if (content instanceof Node) td.append(content); else if (content !== undefined) td.textContent = String(content);
  return td;
}

async function showTopic(topicSeg, tab, params) {
  const topic = segText(topicSeg);
  $("topic-name").textContent = topic;
  $("topic-flow").replaceChildren();
  for (const a of document.querySelectorAll("#tabs a")) {
    a.href = listUrl(topicSeg, a.dataset.tab);
    a.classList.toggle("current", a.dataset.tab === tab);
  }
  $("bulk").hidden = tab !== "dead";
  $("list").dataset.tab = tab;
  $("list").tBodies[0].replaceChildren();
  setPager(null, null, "loading…", null);
  const key = topicSeg + "/" + tab;
  if (trail.key !== key) { trail.key = key; trail.cursors = []; }
  refreshCounts(topic).catch(() => {});
  if (tab === "dead") return showDead(topicSeg, params);
  return showCursorPage(topicSeg, tab, params);
}

async function refreshCounts(topic) {
  const stats = await api("GET", "/v1/stats");
  const t = stats.topics.find((x) => x.topic === topic) || {};
  for (const a of document.querySelectorAll("#tabs a")) {
    const n = t[a.dataset.tab];
    a.querySelector(".count").textContent = n === undefined || n === null ? "" : "(" + n + ")";
  }
  if ($("topic-name").textContent === topic) $("topic-flow").replaceChildren(...flowBadges(t));
}

async function showCursorPage(topicSeg, tab, params) {
  const cursor = /^\d+$/.test(params.get("cursor") || "") ? Number(params.get("cursor")) : 0;
  header(tab === "ready" ? ["id", ""] : ["id", tab === "scheduled" ? "due" : "deadline", "in", ""]);
  const body = $("list").tBodies[0];
  // A page may be short (a listing examines a bounded part of the pool per
  // call): keep asking until a page's worth or the end.
  let next = cursor, shown = 0;
  for (let calls = 0; calls < 20 && shown < PAGE && next !== null; calls++) {
    const query = "?state=" + tab + "&count=" + (PAGE - shown) + "&cursor=" + next;
    const page = await api("GET", "/v1/topics/" + topicSeg + "/jobs" + query);
    if (!isCurrent(topicSeg, tab)) return;
    for (const job of page.items) {
      body.append(jobRow(topicSeg, tab, job));
      shown++;
    }
    next = page.next;
  }
  if (!shown) body.append(emptyRow("No " + tab + " jobs here."));
  const prev = trail.cursors.length ? trail.cursors[trail.cursors.length - 1] : null;
  setPager(cursor ? listUrl(topicSeg, tab) : null,
    prev !== null && cursor ? listUrl(topicSeg, tab, { cursor: prev }) : null,
    shown + " shown" + (cursor ? ", from position " + cursor : ""),
    next !== null ? listUrl(topicSeg, tab, { cursor: next }) : null);
  $("page-next").onclick = () => trail.cursors.push(cursor);
  $("page-prev").onclick = () => trail.cursors.pop();
}

function isCurrent(topicSeg, tab) {
  return trail.key === topicSeg + "/" + tab;
}

function emptyRow(text) {
  const row = el("tr");
  row.append(el("td", text, "muted"));
  return row;
}

function jobRow(topicSeg, tab, job) {
  const row = el("tr");
  row.dataset.id = idText(job);
  row.append(cell("id", link(idText(job), jobHash(topicSeg, job), "id")));
  const time = job.due !== undefined ? job.due : job.deadline;
  if (time !== undefined) {
    row.append(cell(tab === "scheduled" ? "due" : "deadline", when(time)), cell("in", inSeconds(time)));
  }
  const actions = cell("", undefined, "write actions");
  if (tab === "scheduled") actions.append(button("Run now", "run", () => runNow(topicSeg, job)));
  actions.append(button("Remove", "danger remove", () => removeJob(topicSeg, job)));
  row.append(actions);
  return row;
}

async function showDead(topicSeg, params) {
  const page = /^[1-9]\d{0,8}$/.test(params.get("page") || "") ? Number(params.get("page")) : 1;
  header(["", "id", "reason", "last error", "attempts", "died", "body", ""]);
  const data = await api("GET", "/v1/topics/" + topicSeg + "/dead?count=" + PAGE + "&start=" + (page - 1) * PAGE);
  if (!isCurrent(topicSeg, "dead")) return;
  const body = $("list").tBodies[0];
  for (const job of data.dead) {
    const row = el("tr");
    row.dataset.id = idText(job);
    const box = el("input", null, "select write");
    box.type = "checkbox";
    box.setAttribute("aria-label", "select " + idText(job));
    box.addEventListener("change", selectionChanged);
    box.job = job;
    row.append(cell("", box, "write"), cell("id", link(idText(job), jobHash(topicSeg, job), "id")),
      cell("reason", job.reason),
      cell("last error", job.last_error || "", "error-text"), cell("attempts", job.attempts, "num"),
      cell("died", when(job.dead_at)), cell("body", preview(bodyText(job, false), 200), "body"));
    const actions = cell("", undefined, "write actions");
    actions.append(...deadButtons(topicSeg, job));
    row.append(actions);
    body.append(row);
  }
  if (!data.dead.length) body.append(emptyRow(page > 1 ? "No dead letters on this page." : "No dead letters."));
  const pages = Math.max(1, Math.ceil(data.total / PAGE));
  setPager(page > 2 ? listUrl(topicSeg, "dead") : null, page > 1 ? listUrl(topicSeg, "dead", { page: page - 1 }) : null,
    "page " + page + " of " + pages + " (" + data.total + " dead letters)",
    data.next !== null ? listUrl(topicSeg, "dead", { page: page + 1 }) : null);
  selectionChanged();
}

// Requeue and Purge for one dead letter.
function deadButtons(topicSeg, job) {
  const name = idText(job);
  return [button("Requeue", "requeue", () => deadAction(topicSeg, "requeue", idsOf(job), "Requeue " + name + "?")),
    button("Purge", "danger purge", () => deadAction(topicSeg, "purge", idsOf(job), "Purge " + name + " for good?"))];
}

function selected() {
  return Array.from(document.querySelectorAll("#list input.select:checked")).map((b) => b.job);
}
function selectionChanged() {
  const n = selected().length;
  $("requeue-selected").disabled = $("purge-selected").disabled = n === 0;
  $("requeue-selected").textContent = "Requeue selected" + (n ? " (" + n + ")" : "");
  $("purge-selected").textContent = "Purge selected" + (n ? " (" + n + ")" : "");
}

// The selected dead letters, by text id and by bytes, in one request.
function idsOfSelected() {
  const which = { ids: [], ids_base64: [] };
  for (const job of selected()) {
    if (job.id !== undefined) which.ids.push(job.id); else which.ids_base64.push(job.id_base64);
  }
  return which;
}

function startBulk() {
  const topic = () => $("topic-name").textContent;
  const seg = () => trail.key.split("/")[0];
  const some = () => selected().length + " dead letters of " + topic();
  $("requeue-selected").addEventListener("click", () =>
    deadAction(seg(), "requeue", idsOfSelected(), "Requeue " + some() + "?"));
  $("purge-selected").addEventListener("click", () =>
    deadAction(seg(), "purge", idsOfSelected(), "Purge " + some() + " for good?"));
  $("requeue-all").addEventListener("click", () =>
    deadAction(seg(), "requeue", { all: true }, "Requeue every dead letter of " + topic() + "?"));
  $("purge-all").addEventListener("click", () =>
    deadAction(seg(), "purge", { all: true }, "Purge every dead letter of " + topic() + " for good?"));
}
