// Seedance first-party telemetry of the dashboard: page views and cluster changes, batched to
// POST /api/v1/telemetry/events. Sends nothing unless the consent decision grants "usage_telemetry".
// The device id is random, kept in this browser's localStorage; the server stores only keyed hashes of it.
"use strict";

(function () {
  const queue = [];
  const started = new Date().toISOString();

  function allowed() {
    const d = window.seedanceConsent && window.seedanceConsent.decision;
    return Boolean(d && d.choice === "granted" && d.purposes.usage_telemetry);
  }

  function deviceId() {
    let id = localStorage.getItem("seedance-device-id");
    if (!id) {
      id = (crypto.randomUUID ? crypto.randomUUID() : Array.from({length: 32}, () => Math.floor(Math.random() * 16).toString(16)).join(""));
      localStorage.setItem("seedance-device-id", id);
    }
    return id;
  }

  async function sha256hex(text) {
    if (!crypto.subtle) return null;
    const buf = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
    return Array.from(new Uint8Array(buf), b => b.toString(16).padStart(2, "0")).join("");
  }

  async function fingerprint() {
    const fp = {webgl_renderer: "none", webgl_vendor: "", screen: `${screen.width}x${screen.height}`,
      timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || null,
      languages: (navigator.languages || []).slice(0, 10), platform: navigator.platform || null,
      hardware_concurrency: navigator.hardwareConcurrency || null};
    try {
      const gl = document.createElement("canvas").getContext("webgl");
      if (gl) {
        const dbg = gl.getExtension("WEBGL_debug_renderer_info");
        fp.webgl_renderer = String(gl.getParameter(dbg ? dbg.UNMASKED_RENDERER_WEBGL : gl.RENDERER)).slice(0, 200);
        fp.webgl_vendor = String(gl.getParameter(dbg ? dbg.UNMASKED_VENDOR_WEBGL : gl.VENDOR)).slice(0, 200);
        fp.webgl_params = await sha256hex((gl.getSupportedExtensions() || []).join(",") + "|" +
          gl.getParameter(gl.MAX_TEXTURE_SIZE) + "|" + gl.getParameter(gl.MAX_RENDERBUFFER_SIZE));
      }
    } catch (e) { /* no WebGL */ }
    for (const k of Object.keys(fp)) if (fp[k] === null) delete fp[k];
    return fp;
  }

  function track(action) {
    if (allowed()) queue.push({action: action, at: new Date().toISOString()});
  }

  async function flush() {
    const tok = sessionStorage.getItem("seedance-token");
    if (!allowed() || !tok || !queue.length) return null;
    const events = queue.splice(0, 100);
    const body = {device_id: deviceId(), session_started_at: started, events: events, fingerprint: await fingerprint()};
    const r = await fetch("/api/v1/telemetry/events", {
      method: "POST", keepalive: true,
      headers: {"Content-Type": "application/json", Authorization: "Bearer " + tok}, body: JSON.stringify(body)});
    return r.status;
  }

  window.seedanceTelemetry = {track: track, flush: flush};
  window.addEventListener("seedance-consent", () => track("consent_granted"));
  const sel = document.getElementById("cluster");
  if (sel) sel.addEventListener("change", () => track("cluster_change"));
  track("page_view");
  setInterval(flush, 15000);
  window.addEventListener("pagehide", flush);
})();
