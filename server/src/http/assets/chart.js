// The chart: jobs moved as bars, the most lateness as a line. The last 2
// minutes come per second from this server; an hour or a day come per 10
// seconds from the history every server shares through Redis.
"use strict";

const RANGE_LABELS = { 120: "-2 min", 3600: "-1 h", 86400: "-24 h" };

// At most this many bars: a day of 10 s samples is added up into groups.
const MOST_BARS = 480;

function groupSamples(samples) {
  const per = Math.max(1, Math.ceil(samples.length / MOST_BARS));
  if (per === 1) return samples;
  const out = [];
  for (let i = 0; i < samples.length; i += per) {
    const group = samples.slice(i, i + per);
    out.push({
      t: group[0].t,
      moved: group.reduce((a, s) => a + s.moved, 0),
      lateness_max_ms: Math.max(0, ...group.map((s) => s.lateness_max_ms)),
    });
  }
  return out;
}

function drawChart(history, seconds) {
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  const raw = history.samples || [];
  const samples = groupSamples(raw);
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
  const per = raw.length && samples.length ? Math.round((raw.length / samples.length) * (history.step || 1)) : 1;
  ctx.fillText(maxMoved + (per === 1 ? "/s" : " per " + per + " s"), 2, pad - 4);
  ctx.fillText(maxLate + " ms", w - pad - 40, pad - 4);
  ctx.fillText(RANGE_LABELS[seconds] || "", pad, h - 8);
  ctx.fillText("now", w - pad - 20, h - 8);
  const total = raw.reduce((a, s) => a + s.moved, 0);
  const span = seconds <= 120 ? raw.length + " s" : RANGE_LABELS[seconds].slice(1);
  let note = " " + total + " moved in the last " + span;
  if (history.shared && history.shared.error) note += " (history in Redis: " + history.shared.error + ")";
  $("chart-summary").textContent = note;
}
