// Seedance GPU heatmap: node x GPU grid from /api/v1/telemetry/heatmap, coloured by utilization,
// memory or cost; MIG instances split their GPU's cell by their share; hover lists the pods on a
// device and their shares. Plain SVG, no framework, no CDN; refreshes every 5 s. The token comes
// from #token=... or the form and stays in sessionStorage (same as the overview page).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]; // viridis
const CELL = 14, GAP = 2, LABEL = 150, PER_COL = 32;
let firstPaint = null;

function colour(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "#d9dbe0";
  const v = Math.max(0, Math.min(1, x)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(v));
  const f = v - i;
  const c = STOPS[i].map((s, k) => Math.round(s + f * (STOPS[i + 1][k] - s)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }

function token() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("seedance-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("seedance-token");
}

function value(d, metric, maxCost) {
  if (d.lost) return null;
  if (metric === "util") return d.util_pct === null ? null : d.util_pct / 100;
  if (metric === "memory") return d.mem_total_mib ? d.mem_used_mib / d.mem_total_mib : null;
  return maxCost > 0 ? d.cost_usd_h / maxCost : 0;
}

function label(d, metric) {
  if (metric === "util") return d.util_pct === null ? "n/a" : d.util_pct.toFixed(0) + "%";
  if (metric === "memory") return d.mem_total_mib ? (100 * d.mem_used_mib / d.mem_total_mib).toFixed(0) + "%" : "n/a";
  return "$" + d.cost_usd_h.toFixed(2) + "/h";
}

function draw(data) {
  const metric = document.getElementById("metric").value;
  const box = document.getElementById("grid");
  const devices = data.gpus.filter(d => d.gpu >= 0);
  const lost = data.gpus.filter(d => d.lost);
  const byNode = new Map();
  for (const d of devices) {
    if (!byNode.has(d.node)) byNode.set(d.node, []);
    byNode.get(d.node).push(d);
  }
  const nodes = [...byNode.keys()].sort();
  const width = Math.max(1, ...devices.map(d => d.gpu + 1));
  const maxCost = Math.max(0, ...devices.map(d => d.cost_usd_h));
  const perCol = Math.min(Math.max(1, nodes.length), PER_COL);
  const cols = Math.ceil(nodes.length / perCol);
  const colW = LABEL + width * (CELL + GAP) + 20;
  // one markup string, parsed once: much cheaper than an element per call for hundreds of cells
  const parts = [`<svg xmlns="${SVG}" id="heatmap-svg" width="${Math.max(1, cols) * colW}" ` +
                 `height="${perCol * (CELL + GAP) + 4}">`];
  nodes.forEach((node, i) => {
    const x0 = Math.floor(i / perCol) * colW, y = (i % perCol) * (CELL + GAP);
    parts.push(`<text x="${x0 + LABEL - 6}" y="${y + CELL - 3}" text-anchor="end">${esc(node)}</text>`);
    const gpus = new Map();
    for (const d of byNode.get(node)) {
      if (!gpus.has(d.gpu)) gpus.set(d.gpu, []);
      gpus.get(d.gpu).push(d);
    }
    for (const [g, list] of gpus) {
      let off = 0;
      for (const d of list.sort((a, b) => a.slice.localeCompare(b.slice))) {
        const h = d.slice ? Math.max(1, CELL * d.fraction) : CELL;
        parts.push(`<rect class="gpu" x="${x0 + LABEL + g * (CELL + GAP)}" y="${y + off}" width="${CELL}" ` +
                   `height="${h}" fill="${colour(value(d, metric, maxCost))}" data-node="${esc(node)}" ` +
                   `data-gpu="${g}" data-slice="${esc(d.slice)}" data-value="${esc(label(d, metric))}" ` +
                   `data-holders="${d.holders.length}" data-key="${esc(node + "|" + g + "|" + d.slice)}"/>`);
        off += h;
      }
    }
  });
  parts.push("</svg>");
  box.innerHTML = parts.join("");
  const svg = box.firstElementChild;
  box.dataset.devices = String(devices.length);
  const index = new Map(devices.map(d => [d.node + "|" + d.gpu + "|" + d.slice, d]));
  svg.addEventListener("mousemove", ev => tip(ev, index.get(ev.target.dataset && ev.target.dataset.key), metric));
  svg.addEventListener("mouseleave", () => { document.getElementById("tip").hidden = true; });
  const total = devices.reduce((s, d) => s + d.cost_usd_h, 0);
  const held = devices.filter(d => d.holders.length).length;
  document.getElementById("summary").textContent =
    `(${nodes.length} nodes, ${devices.length} devices, ${held} in use, $${total.toFixed(2)}/h)`;
  document.getElementById("lost").textContent = lost.length ? "lost: " + lost.map(d => `${d.node} ${d.uuid}`).join(", ") : "";
  legend(metric, maxCost);
}

function legend(metric, maxCost) {
  const box = document.getElementById("legend");
  const lg = el("svg", {width: 320, height: 30});
  for (let k = 0; k <= 20; k++) el("rect", {x: 10 + k * 12, y: 2, width: 12, height: 12, fill: colour(k / 20)}, lg);
  el("text", {x: 10, y: 27}, lg).textContent = metric === "cost" ? "$0" : "0%";
  el("text", {x: 262, y: 27, "text-anchor": "end"}, lg).textContent =
    metric === "cost" ? "$" + maxCost.toFixed(2) + "/h" : "100%";
  box.replaceChildren(lg);
}

function tip(ev, d, metric) {
  const t = document.getElementById("tip");
  if (!d) { t.hidden = true; return; }
  const what = d.slice ? `MIG ${esc(d.profile)} (instance ${esc(d.slice)}, ${(100 * d.fraction).toFixed(1)}% of the GPU)` : esc(d.model);
  const rows = d.holders.map(h => `<tr><td>${esc(h.namespace)}/${esc(h.pod)}</td><td>${esc(h.container)}</td>` +
    `<td>${(100 * h.allocated).toFixed(0)}% held</td><td>${h.used === null ? "" : (100 * h.used).toFixed(0) + "% used"}</td></tr>`);
  t.innerHTML = `<b>${esc(d.node)} GPU ${d.gpu}</b> ${what}<br>${label(d, metric)} · ` +
    `${d.mem_used_mib === null ? "?" : d.mem_used_mib.toFixed(0)}/${d.mem_total_mib === null ? "?" : d.mem_total_mib.toFixed(0)} MiB · ` +
    `$${d.cost_usd_h.toFixed(2)}/h<table>${rows.join("") || "<tr><td>no pods</td></tr>"}</table>`;
  t.hidden = false;
  t.style.left = (ev.clientX + 14) + "px";
  t.style.top = (ev.clientY + 14) + "px";
}

let last = null;

async function refresh() {
  const status = document.getElementById("status");
  const tok = token();
  if (!tok) { document.getElementById("login").hidden = false; status.textContent = "token needed"; return; }
  const cluster = document.getElementById("cluster").value || "default";
  try {
    const r = await fetch("/api/v1/telemetry/heatmap?cluster=" + encodeURIComponent(cluster),
                          {headers: {Authorization: "Bearer " + tok}});
    if (r.status === 401) {
      sessionStorage.removeItem("seedance-token");
      document.getElementById("panels").hidden = true;
      document.getElementById("login").hidden = false;
      status.textContent = "token refused";
      return;
    }
    if (!r.ok) throw new Error((await r.json()).detail || r.status);
    last = await r.json();
    if (firstPaint === null) document.body.dataset.fetchedMs = performance.now().toFixed(1);
    document.getElementById("panels").hidden = false;
    document.getElementById("login").hidden = true;
    draw(last);
    if (firstPaint === null) {
      await new Promise(res => requestAnimationFrame(() => requestAnimationFrame(res)));  // painted
      firstPaint = performance.now();
      performance.mark("heatmap-painted");
      document.body.dataset.firstPaintMs = firstPaint.toFixed(1);
    }
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.dataset.state = "ready";
    status.dataset.updates = String(Number(status.dataset.updates || 0) + 1);
  } catch (e) {
    status.textContent = "error: " + e.message;
    status.dataset.state = "error";
  }
}

document.getElementById("login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("seedance-token", document.getElementById("token").value.trim());
  refresh();
});
document.getElementById("metric").addEventListener("change", () => { if (last) draw(last); });
document.getElementById("cluster").addEventListener("change", refresh);
refresh();
setInterval(refresh, 5000);
