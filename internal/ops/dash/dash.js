// The aerie dashboard: /history once at load (the last minutes), then
// /cluster every second. Everything shown is derived here from broker
// snapshots: rates from counter deltas, lag from doubt-horizon ticks.
"use strict";

const WINDOW_MS = 5 * 60 * 1000; // what the charts show
const SUBTICK = 1024; // ticks per millisecond (internal/tick: SubTickBits = 10)
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

const state = { points: [], topo: { brokers: [], links: [] }, local: [], errors: {} };

// A point is one moment: {t, brokers: {id: status}}.
function addPoint(t, statuses) {
  const last = state.points[state.points.length - 1];
  const p = { t: t, brokers: {} };
  for (const s of statuses) p.brokers[s.id] = s;
  if (last && t <= last.t) return;
  state.points.push(p);
  while (state.points.length > 2 && state.points[0].t < t - WINDOW_MS) state.points.shift();
}

function lagMs(t, stream) {
  if (!stream.DoubtHorizon) return null;
  return Math.max(0, t - Math.floor(stream.DoubtHorizon / SUBTICK));
}

// rate of get(status) in 1/s between two points; null across a restart.
function rate(a, b, id, get) {
  const sa = a && a.brokers[id], sb = b && b.brokers[id];
  if (!sa || !sb) return null;
  const d = get(sb) - get(sa), dt = (b.t - a.t) / 1000;
  if (d < 0 || dt <= 0) return null;
  return d / dt;
}

function streamOf(s, pubend) {
  return (s.streams || []).find((x) => x.Pubend === pubend);
}

function brokerIds() {
  const ids = new Set(state.topo.brokers.map((b) => b.id));
  for (const p of state.points) for (const id in p.brokers) ids.add(id);
  return [...ids].sort();
}

function pubends() {
  const set = new Set();
  for (const b of state.topo.brokers) for (const p of b.pubends || []) set.add(p);
  const last = state.points[state.points.length - 1];
  if (last) for (const id in last.brokers) for (const st of last.brokers[id].streams || []) set.add(st.Pubend);
  return [...set].sort();
}

// publishedRate is a pubend's events per second at its PHB.
function publishedRate(a, b, pubend) {
  for (const id in b.brokers) {
    const st = streamOf(b.brokers[id], pubend);
    if (st && st.Hosted) return rate(a, b, id, (s) => (streamOf(s, pubend) || {}).Published || 0);
  }
  return null;
}

// ---- charts -------------------------------------------------------------

function series(label, i, f) {
  const pts = [];
  for (let k = 1; k < state.points.length; k++) {
    const v = f(state.points[k - 1], state.points[k]);
    if (v !== null && isFinite(v)) pts.push([state.points[k].t, v]);
  }
  return { label: label, color: COLORS[i % COLORS.length], pts: pts };
}

function drawChart(id, list, unit) {
  const canvas = document.getElementById(id);
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const now = state.points.length ? state.points[state.points.length - 1].t : Date.now();
  const x0 = now - WINDOW_MS;
  let ymax = 1;
  for (const s of list) for (const [, v] of s.pts) ymax = Math.max(ymax, v);
  ymax = niceCeil(ymax * 1.1);
  const L = 56, R = 8, T = 8, B = 22;
  const X = (t) => L + ((t - x0) / WINDOW_MS) * (w - L - R);
  const Y = (v) => T + (1 - v / ymax) * (h - T - B);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#667";
  g.strokeStyle = "#e4e7eb";
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4, y = Y(v);
    g.beginPath(); g.moveTo(L, y); g.lineTo(w - R, y); g.stroke();
    g.textAlign = "right";
    g.fillText(fmt(v) + (unit ? " " + unit : ""), L - 4, y + 4);
  }
  g.textAlign = "center";
  for (let m = 0; m <= 5; m++) {
    const t = now - m * 60000;
    g.fillText(m === 0 ? "now" : "-" + m + " min", Math.min(Math.max(X(t), L + 14), w - R - 14), h - 6);
  }
  let points = 0;
  for (const s of list) {
    g.strokeStyle = s.color;
    g.lineWidth = 2;
    g.beginPath();
    s.pts.forEach(([t, v], k) => (k ? g.lineTo(X(t), Y(v)) : g.moveTo(X(t), Y(v))));
    g.stroke();
    points += s.pts.length;
  }
  canvas.dataset.series = String(list.length);
  canvas.dataset.points = String(points);
  const legend = document.getElementById(id.replace("chart", "legend"));
  legend.replaceChildren(...list.map((s) => {
    const span = el("span", {}, s.label + " " + (s.pts.length ? fmt(s.pts[s.pts.length - 1][1]) : "—"));
    const key = el("i", {});
    key.style.background = s.color;
    span.prepend(key);
    return span;
  }));
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (v >= 100) return Math.round(v).toLocaleString("en");
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2).replace(/\.?0+$/, "") || "0";
}

function drawCharts() {
  const ids = brokerIds();
  const rates = pubends().map((p, i) => series(p + " published", i, (a, b) => publishedRate(a, b, p)));
  ids.forEach((id, i) => {
    const s = series(id + " delivered", rates.length + i, (a, b) => rate(a, b, id, (x) => x.stats.Delivered));
    if (s.pts.some(([, v]) => v > 0)) rates.push(s);
  });
  drawChart("chart-rate", rates, "/s");
  drawChart("chart-lag", ids.map((id, i) => series(id, i, (a, b) => worstLag(b, id))), "ms");
  const sum = (get) => (a, b) => {
    let tot = null;
    for (const id of ids) {
      const r = rate(a, b, id, get);
      if (r !== null) tot = (tot || 0) + r;
    }
    return tot;
  };
  drawChart("chart-nack", [
    series("nacks sent", 0, sum((s) => s.stats.NacksSent)),
    series("nacks received", 1, sum((s) => s.stats.NacksReceived)),
    series("retransmissions", 3, sum((s) => s.stats.Retransmissions)),
  ], "/s");
}

function worstLag(p, id) {
  const s = p.brokers[id];
  if (!s) return null;
  let worst = null;
  for (const st of s.streams || []) {
    const l = lagMs(p.t, st);
    if (l !== null) worst = Math.max(worst || 0, l);
  }
  return worst;
}

// ---- topology -----------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function linkState(last, l) {
  const up = last && last.brokers[l.up], down = last && last.brokers[l.down];
  if (up) return (up.peers || []).includes(l.down) ? "up" : "down";
  if (down) return (down.peers || []).includes(l.up) ? "up" : "down";
  return "unknown";
}

// role is what a broker does in the topology: hosts pubends, feeds
// others (an intermediate broker), or only serves subscribers.
function role(b) {
  if ((b.pubends || []).length) return "PHB";
  if (state.topo.links.some((l) => l.up === b.id && !l.cell)) return "IB";
  return "SHB";
}

function drawTopology() {
  const root = document.getElementById("topology");
  const last = state.points[state.points.length - 1];
  const brokers = state.topo.brokers.length ? state.topo.brokers : brokerIds().map((id) => ({ id: id, cell: id }));
  // Layers: a broker sits one below the deepest broker that feeds it.
  const depth = {};
  for (const b of brokers) depth[b.id] = 0;
  for (let i = 0; i < brokers.length; i++)
    for (const l of state.topo.links) if (!l.cell && depth[l.up] !== undefined) depth[l.down] = Math.max(depth[l.down] || 0, depth[l.up] + 1);
  const layers = [];
  for (const b of brokers) (layers[depth[b.id]] = layers[depth[b.id]] || []).push(b);
  const W = root.clientWidth || 800, H = 260, bw = 96, bh = 40;
  const pos = {};
  layers.forEach((layer, d) => layer.forEach((b, i) => {
    pos[b.id] = { x: ((i + 1) * W) / (layer.length + 1), y: 30 + (d * (H - 60)) / Math.max(1, layers.length - 1) };
  }));
  root.setAttribute("viewBox", "0 0 " + W + " " + H);
  const kids = [];
  for (const l of state.topo.links) {
    const a = pos[l.up], b = pos[l.down];
    if (!a || !b) continue;
    const st = linkState(last, l);
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "link " + st, "data-up": l.up, "data-down": l.down, "data-state": st });
    line.appendChild(svg("title", {}, l.up + " — " + l.down + ": " + st));
    kids.push(line);
  }
  for (const b of brokers) {
    const p = pos[b.id], s = last && last.brokers[b.id];
    const cls = "node" + (state.local.includes(b.id) ? " local" : "") + (s ? "" : " unreachable");
    const grp = svg("g", { class: cls, "data-id": b.id, transform: "translate(" + (p.x - bw / 2) + "," + (p.y - bh / 2) + ")" });
    grp.appendChild(svg("rect", { width: bw, height: bh, rx: 6 }));
    grp.appendChild(svg("text", { x: bw / 2, y: 16 }, b.id));
    const sub = s ? role(b) + " · " + s.clients + " cl" : "unreachable";
    grp.appendChild(svg("text", { x: bw / 2, y: 32, class: "role" }, sub));
    kids.push(grp);
  }
  root.replaceChildren(...kids);
}

// ---- tables -------------------------------------------------------------

function row(cells) {
  const tr = el("tr", {});
  for (const c of cells) {
    const td = el("td", c.cls ? { class: c.cls } : {}, c.text !== undefined ? c.text : c);
    tr.appendChild(td);
  }
  return tr;
}

function drawTables() {
  const n = state.points.length, b = state.points[n - 1], a = state.points[n - 2];
  if (!b) return;
  const pubRows = [];
  for (const p of pubends()) {
    const r = a ? publishedRate(a, b, p) : null;
    for (const id of Object.keys(b.brokers).sort()) {
      const st = streamOf(b.brokers[id], p);
      if (!st) continue;
      const lag = lagMs(b.t, st);
      pubRows.push(row([p, id, st.Hosted ? "PHB" : "downstream", { text: lag === null ? "—" : fmt(lag) + " ms", cls: lag > 5000 ? "bad" : "" }, fmt(r), { text: String(st.Gaps), cls: st.Gaps ? "bad" : "" }]));
    }
  }
  document.querySelector("#pubends tbody").replaceChildren(...pubRows);
  const brRows = [];
  for (const id of Object.keys(b.brokers).sort()) {
    const s = b.brokers[id];
    const want = state.topo.links.filter((l) => l.up === id || l.down === id);
    const up = want.filter((l) => linkState(b, l) === "up").length;
    const r = (get) => fmt(a ? rate(a, b, id, get) : null);
    brRows.push(row([id, { text: up + "/" + want.length, cls: up < want.length ? "bad" : "" }, String(s.clients),
      r((x) => x.stats.Delivered), r((x) => x.stats.NacksSent), r((x) => x.stats.NacksReceived), r((x) => x.stats.Retransmissions),
      String(s.stats.NacksSent), String(s.stats.Retransmissions), String(s.auth_failures)]));
  }
  document.querySelector("#brokers tbody").replaceChildren(...brRows);
  const errs = Object.entries(state.errors).map(([id, e]) => id + ": " + e);
  document.getElementById("errors").textContent = errs.length ? "Missing views — " + errs.join("; ") : "";
}

function render() {
  drawTopology();
  drawCharts();
  drawTables();
}

// ---- polling ------------------------------------------------------------

async function poll() {
  const live = document.getElementById("live");
  try {
    const r = await fetch("/cluster", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    const c = await r.json();
    state.topo = c.topology || state.topo;
    state.local = c.local || [];
    state.errors = c.errors || {};
    addPoint(c.time_ms, c.brokers || []);
    render();
    live.textContent = "live · updated " + new Date(c.time_ms).toLocaleTimeString();
    live.classList.remove("stale");
  } catch (e) {
    live.textContent = "disconnected: " + e.message;
    live.classList.add("stale");
  }
  setTimeout(poll, 1000);
}

async function start() {
  try {
    const r = await fetch("/history", { cache: "no-store" });
    if (r.ok) for (const s of await r.json()) addPoint(s.time_ms, s.brokers || []);
  } catch (e) {
    // no history: the charts start now
  }
  poll();
}

window.addEventListener("resize", render);
start();
