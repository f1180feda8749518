// Seedance dashboard: fetches /api/v1/dashboard and draws plain SVG. No framework, no CDN.
// The token comes from the page's #token=... fragment (never sent to the server as part of a
// URL) or the login form, and is kept in sessionStorage for this tab only.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]; // viridis

function colour(share) { // share 0..1 → viridis rgb()
  const x = Math.max(0, Math.min(1, share)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, k) => Math.round(v + f * (STOPS[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function token() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("seedance-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("seedance-token");
}

function drawHeatmap(rows) {
  const box = document.getElementById("heatmap");
  box.textContent = "";
  if (!rows.length) { box.textContent = "no nodes in this cluster"; return; }
  const cell = 12, gap = 1, label = 150;
  const maxG = Math.max(1, ...rows.map(r => r.gpu_milli.length));
  const perCol = Math.min(rows.length, 64);
  const cols = Math.ceil(rows.length / perCol);
  const colW = label + maxG * (cell + gap) + 16;
  const svg = el("svg", {width: cols * colW, height: perCol * (cell + gap) + 4, id: "heatmap-svg"}, box);
  rows.forEach((r, i) => {
    const x0 = Math.floor(i / perCol) * colW, y = (i % perCol) * (cell + gap);
    const t = el("text", {x: x0 + label - 4, y: y + cell - 2, "text-anchor": "end"}, svg);
    t.textContent = r.node + (r.status !== "ready" ? " (" + r.status + ")" : "");
    r.gpu_milli.forEach((m, g) => {
      const rect = el("rect", {
        x: x0 + label + g * (cell + gap), y: y, width: cell, height: cell, fill: colour(m / 1000),
        class: "gpu", "data-node": r.node, "data-gpu": g, "data-milli": m,
        stroke: r.status !== "ready" ? "#d33" : "none",
      }, svg);
      el("title", {}, rect).textContent = `${r.node} GPU ${g} (${r.model || "?"}): ${m}/1000 milli allocated`;
    });
  });
  const legend = document.getElementById("legend");
  legend.textContent = "";
  const lg = el("svg", {width: 320, height: 30}, legend);
  for (let k = 0; k <= 20; k++) el("rect", {x: 10 + k * 12, y: 2, width: 12, height: 12, fill: colour(k / 20)}, lg);
  el("text", {x: 10, y: 27}, lg).textContent = "0%";
  el("text", {x: 250, y: 27, "text-anchor": "end"}, lg).textContent = "100% allocated";
}

function drawTiers(by) {
  const box = document.getElementById("tiers");
  const states = [...new Set(Object.values(by).flatMap(o => Object.keys(o)))].sort();
  if (!states.length) { box.textContent = "no jobs"; return; }
  let html = "<table><tr><th>tier</th>" + states.map(s => `<th class="n">${s}</th>`).join("") + "</tr>";
  for (const tier of Object.keys(by).sort()) {
    html += `<tr><td>${tier}</td>` + states.map(s => `<td class="n">${by[tier][s] || 0}</td>`).join("") + "</tr>";
  }
  box.innerHTML = html + "</table>";
}

function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }

function drawReasons(rows) {
  const box = document.getElementById("reasons");
  if (!rows.length) { box.textContent = "nothing pending"; return; }
  box.innerHTML = "<table><tr><th>reason</th><th>tier</th><th class=\"n\">jobs</th><th>e.g.</th></tr>" +
    rows.map(r => `<tr><td>${esc(r.reason)}</td><td>${esc(r.tier)}</td><td class="n">${r.jobs}</td>` +
      `<td>${esc(r.example)}</td></tr>`).join("") + "</table>";
}

function drawCost(points) {
  const box = document.getElementById("cost");
  box.textContent = "";
  const W = 900, H = 220, L = 60, B = 24;
  const svg = el("svg", {width: W, height: H, id: "cost-svg"}, box);
  const max = Math.max(1e-9, ...points.map(p => p.usd_per_hour));
  const xs = i => L + (W - L - 10) * i / Math.max(1, points.length - 1);
  const ys = v => H - B - (H - B - 10) * v / max;
  el("line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999"}, svg);
  el("line", {x1: L, y1: 10, x2: L, y2: H - B, stroke: "#999"}, svg);
  el("text", {x: L - 4, y: 16, "text-anchor": "end"}, svg).textContent = "$" + max.toFixed(2);
  el("text", {x: L - 4, y: H - B, "text-anchor": "end"}, svg).textContent = "$0";
  if (points.length) {
    const hours = (Date.parse(points[points.length - 1].t) - Date.parse(points[0].t)) / 3.6e6;
    el("text", {x: L, y: H - 6}, svg).textContent = Math.round(hours) + " h ago";
    el("text", {x: W - 10, y: H - 6, "text-anchor": "end"}, svg).textContent = "now";
  }
  const d = points.map((p, i) => (i ? "L" : "M") + xs(i).toFixed(1) + "," + ys(p.usd_per_hour).toFixed(1)).join("");
  el("path", {d: d, fill: "none", stroke: "#2a7", "stroke-width": 2, id: "cost-line"}, svg);
}

async function refresh() {
  const status = document.getElementById("status");
  const tok = token();
  if (!tok) { document.getElementById("login").hidden = false; status.textContent = "token needed"; return; }
  const sel = document.getElementById("cluster");
  const q = sel.value ? "?cluster=" + encodeURIComponent(sel.value) : "";
  try {
    const r = await fetch("/api/v1/dashboard" + q, {headers: {Authorization: "Bearer " + tok}});
    if (r.status === 401) {
      sessionStorage.removeItem("seedance-token");
      document.getElementById("panels").hidden = true;
      document.getElementById("login").hidden = false;
      status.textContent = "token refused";
      return;
    }
    if (!r.ok) throw new Error((await r.json()).detail || r.status);
    const data = await r.json();
    if (sel.options.length !== data.clusters.length) {
      sel.innerHTML = data.clusters.map(c => `<option>${esc(c)}</option>`).join("");
      if (data.cluster) sel.value = data.cluster;
    }
    document.getElementById("panels").hidden = false;
    document.getElementById("login").hidden = true;
    drawHeatmap(data.heatmap);
    drawTiers(data.jobs_by_tier_status);
    drawReasons(data.pending_reasons);
    drawCost(data.cost);
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.dataset.state = "ready";
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
document.getElementById("cluster").addEventListener("change", refresh);
refresh();
setInterval(refresh, 5000);
