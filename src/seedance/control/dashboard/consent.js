// Seedance consent dialog (CCPA "do not sell or share", GDPR/ePrivacy consent), driven by the server's
// consent flow document (GET /api/v1/privacy/consent-flow, from config/privacy/consent_flow_v2.json).
// Two steps: choose (accept / refuse, one click each), then confirm. Until a "granted" decision is stored,
// no third-party script is added to the page and no telemetry is sent: the document's scripts are the
// only ones this file ever loads, and only for the purposes the decision grants.
"use strict";

(function () {
  const KEY = "seedance-consent";
  const state = {flow: null, decision: null, pending: null};
  window.seedanceConsent = state;

  function saved(flow) {
    try {
      const d = JSON.parse(localStorage.getItem(KEY) || "null");
      if (d && d.version === flow.version && Date.now() - d.at < flow.remember_days * 864e5) return d;
    } catch (e) { /* unreadable: ask again */ }
    return null;
  }

  function loadScripts(flow, d) {
    if (!d || d.choice !== "granted") return;
    for (const s of flow.third_party_scripts) {
      if (!d.purposes[s.purpose] || document.querySelector(`script[data-consent-script="${s.id}"]`)) continue;
      const el = document.createElement("script");
      el.src = s.src;
      el.async = true;
      el.dataset.consentScript = s.id;
      document.head.appendChild(el);
    }
  }

  function record(flow, d) {
    const tok = sessionStorage.getItem("seedance-token");
    if (!tok) return;
    fetch("/api/v1/privacy/consents", {
      method: "POST", headers: {"Content-Type": "application/json", Authorization: "Bearer " + tok},
      body: JSON.stringify({flow_version: flow.version, choice: d.choice, purposes: d.purposes}),
    }).catch(() => {});
  }

  function decide(flow, choice) {
    const purposes = {};
    for (const p of flow.purposes) purposes[p.id] = choice === "granted";
    const d = {version: flow.version, choice: choice, purposes: purposes, at: Date.now()};
    localStorage.setItem(KEY, JSON.stringify(d));
    state.decision = d;
    record(flow, d);
    loadScripts(flow, d);
    window.dispatchEvent(new CustomEvent("seedance-consent", {detail: d}));
  }

  function show(flow, stepIndex) {
    const box = document.getElementById("consent");
    const step = flow.steps[stepIndex];
    box.hidden = false;
    box.dataset.step = step.id;
    box.textContent = "";
    const h = document.createElement("h2");
    h.id = "consent-title";
    h.textContent = step.title;
    const p = document.createElement("p");
    p.textContent = step.body;
    box.append(h, p);
    if (stepIndex === 0) {
      const ul = document.createElement("ul");
      for (const pur of flow.purposes) {
        const li = document.createElement("li");
        li.textContent = `${pur.label}: ${pur.description}`;
        ul.appendChild(li);
      }
      box.appendChild(ul);
    } else {
      const chosen = document.createElement("p");
      chosen.className = "consent-choice";
      const does = state.pending === "granted" ? "grant" : "refuse";
      chosen.textContent = "Your choice: " + flow.steps[0].actions.find(a => a.does === does).label;
      box.appendChild(chosen);
    }
    const row = document.createElement("div");
    row.className = "consent-actions";
    for (const a of step.actions) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = a.label;
      b.dataset.does = a.does;
      b.addEventListener("click", () => {
        if (a.does === "grant" || a.does === "refuse") { state.pending = a.does === "grant" ? "granted" : "refused"; show(flow, 1); }
        else if (a.does === "back") show(flow, 0);
        else { decide(flow, state.pending); box.hidden = true; box.dataset.step = "done"; }
      });
      row.appendChild(b);
    }
    box.appendChild(row);
  }

  async function start() {
    const box = document.createElement("div");
    box.id = "consent";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-labelledby", "consent-title");
    box.hidden = true;
    document.body.appendChild(box);
    let flow;
    try {
      const r = await fetch("/api/v1/privacy/consent-flow");
      if (!r.ok) throw new Error(String(r.status));
      flow = await r.json();
    } catch (e) {
      box.dataset.step = "unavailable"; // no flow, no decision: nothing optional loads
      return;
    }
    state.flow = flow;
    const link = document.createElement("button");
    link.type = "button";
    link.id = "privacy-link";
    link.textContent = "Privacy";
    link.addEventListener("click", () => show(flow, 0));
    const header = document.querySelector("header");
    if (header) header.appendChild(link);
    state.decision = saved(flow);
    if (state.decision) { box.dataset.step = "done"; loadScripts(flow, state.decision); }
    else show(flow, 0);
  }

  start();
})();
