// The dashboard's helpers: the API with the session cookie, building
// elements (always with textContent: topics, ids and bodies are arbitrary
// bytes and never parsed as HTML), times, and names in URLs.
"use strict";

const $ = (id) => document.getElementById(id);
const canWrite = () => document.body.dataset.access === "full";

// The API with the cookie; the header marks our own requests (CSRF guard),
// and every write says JSON, with a body or without (the server's rule).
async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "x-delayer-dashboard": "1" } };
  if (method !== "GET") init.headers["content-type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) { window.location.assign("/" + window.location.hash); }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.statusText;
    throw new Error(message);
  }
  return data;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
function link(text, hash, cls) {
  const a = el("a", text, cls);
  a.href = hash;
  return a;
}
function button(text, cls, onClick) {
  const b = el("button", text, cls);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}
function when(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "";
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace("Z", " UTC");
}
function duration(abs) {
  return abs < 120 ? abs.toFixed(1) + " s" : abs < 7200 ? (abs / 60).toFixed(1) + " min" : (abs / 3600).toFixed(1) + " h";
}
function inSeconds(seconds) {
  const d = seconds - Date.now() / 1000;
  const text = duration(Math.abs(d));
  return d >= 0 ? "in " + text : text + " ago";
}
// How long since a time past ("41.0 min"); a clock a little behind Redis's is 0.
function ago(seconds) {
  return duration(Math.max(0, Date.now() / 1000 - seconds));
}
function num(value) {
  return value === null || value === undefined ? "?" : String(value);
}
function say(text, isError) {
  const m = $("message");
  m.textContent = text;
  m.className = isError ? "error" : "ok";
}

// Names in URLs. A path segment names bytes: text is percent-encoded as
// UTF-8, and an id that is not UTF-8 (the API's id_base64) byte by byte, as
// the API reads its paths. A segment taken from the page's own URL (a deep
// link, maybe typed or hostile) is made canonical before it is used: "%XX"
// kept, unreserved characters kept, anything else encoded, so it can neither
// leave its segment ("/", "?", "#") nor change the API path it goes into.
const UNRESERVED = /^[A-Za-z0-9\-_.~]$/;
function segOfText(text) {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}
function segOfBase64(b64) {
  const bytes = atob(b64);
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += "%" + bytes.charCodeAt(i).toString(16).padStart(2, "0").toUpperCase();
  return out;
}
function canonicalSeg(raw) {
  let out = "";
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === "%" && /^[0-9A-Fa-f]{2}$/.test(raw.substr(i + 1, 2))) {
      out += "%" + raw.substr(i + 1, 2).toUpperCase();
      i += 2;
    } else if (UNRESERVED.test(c)) {
      out += c;
    } else {
      out += segOfText(c === "%" ? "%" : raw.codePointAt(i) > 0xffff ? raw.substr(i++, 2) : c);
    }
  }
  return out;
}
// A browser resolves "." and ".." segments (even encoded) before sending:
// such a name cannot be put in an API path.
function addressable(seg) {
  return !/^(\.|%2E){1,2}$/i.test(seg);
}
// A segment as text for people: its UTF-8, or its bytes as base64.
function segText(seg) {
  try { return decodeURIComponent(seg); } catch (e) {
    const bytes = seg.replace(/%([0-9A-F]{2})|(.)/gi, (m, hex, ch) => hex ? String.fromCharCode(parseInt(hex, 16)) : ch);
    return "base64:" + btoa(bytes);
  }
}

// A job's id as shown: text as is; one that is not UTF-8 as base64.
function idText(job) {
  return job.id !== undefined ? job.id : "base64:" + job.id_base64;
}
function idSeg(job) {
  return job.id !== undefined ? segOfText(job.id) : segOfBase64(job.id_base64);
}
function idsOf(job) {
  return job.id !== undefined ? { ids: [job.id] } : { ids_base64: [job.id_base64] };
}
function jobHash(topicSeg, job) {
  return "#/jobs/" + topicSeg + "/" + idSeg(job);
}

// A body: JSON pretty-printed, other text as is, anything else as hex.
// Never HTML: the caller puts it in with textContent.
function bodyText(job, pretty) {
  if (job.body !== undefined) {
    if (pretty) {
      try { return JSON.stringify(JSON.parse(job.body), null, 2); } catch (e) { /* not JSON: as is */ }
    }
    return job.body;
  }
  if (job.body_base64 === undefined) return "";
  const bytes = atob(job.body_base64);
  let hex = "";
  for (let i = 0; i < bytes.length; i++) hex += bytes.charCodeAt(i).toString(16).padStart(2, "0") + " ";
  return "hex: " + hex.trim();
}
function preview(text, most) {
  return text.length > most ? text.slice(0, most) + "…" : text;
}
