// GDAL MCP approval console: polls /console/state every second and redraws; posts carry the CSRF token.
// Every value from the server is put in the page as text (textContent), never as HTML.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  // viewer: opened with the MCP token (or loopback without one): reads only, no decision buttons
  let approver = document.querySelector('meta[name="console-role"]').content === "approver";
  const $ = (id) => document.getElementById(id);
  const POLL_MS = 1000;
  let busy = false;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("data-")) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  async function post(url) {
    const r = await fetch(url, { method: "POST", credentials: "same-origin",
                                 headers: { "X-CSRF-Token": csrf } });
    if (r.status === 401 || r.status === 403) { location.href = "/console"; return; }
    if (!r.ok) {
      let msg = r.statusText;
      try { msg = (await r.json()).error.message; } catch (e) { /* not JSON */ }
      $("status").textContent = "refused: " + msg;
    }
    await refresh();
  }

  function button(label, cls, url) {
    const b = el("button", { class: cls, type: "button", textContent: label });
    b.addEventListener("click", () => { b.disabled = true; post(url); });
    return b;
  }

  // Redraw a list only when its content changed, so buttons do not flicker under the pointer.
  const last = {};
  function draw(id, items, render, emptyId) {
    const key = JSON.stringify(items);
    if (last[id] === key) return;
    last[id] = key;
    $(id).replaceChildren(...items.map(render));
    if (emptyId) $(emptyId).hidden = items.length > 0;
  }

  function pendingCard(p) {
    const id = encodeURIComponent(p.id);
    return el("li", { class: "pending", "data-id": p.id },
      el("div", { class: "meta", textContent: `${p.tool} · ${p.kind} · waits until ${p.expires} · id ${p.id}` }),
      el("div", { class: "question", textContent: p.question }),
      approver ? button("Approve", "approve", `/console/confirmations/${id}/approve`) : null, " ",
      approver ? button("Deny", "deny", `/console/confirmations/${id}/deny`) : null);
  }

  function decidedItem(p) {
    return el("li", { class: "decided " + p.status, "data-id": p.id },
      el("b", { class: p.status === "approved" || p.status === "used" ? "ok" : "bad", textContent: p.status }),
      ` ${p.tool}: ${p.question}`);
  }

  function jobRow(j) {
    const bar = j.progress === null ? el("span", { class: "muted", textContent: "…" })
                                    : el("progress", { max: 100, value: j.progress });
    return el("tr", { class: "job " + j.status, "data-id": j.id },
      el("td", { class: "tool", textContent: j.tool }),
      el("td", { class: "status " + j.status, textContent: j.status }),
      el("td", {}, bar, " ", el("span", { class: "message", textContent: j.message })),
      el("td", { textContent: j.seconds === null ? `since ${j.started.slice(11, 19)}` : `${j.seconds} s` }),
      el("td", {}, approver && j.status === "running" ? button("Cancel", "cancel", `/console/jobs/${encodeURIComponent(j.id)}/cancel`) : null));
  }

  function outputItem(o) {
    const src = "/console/thumbnail?path=" + encodeURIComponent(o.path);
    const img = el("img", { alt: "quicklook of " + o.path, loading: "lazy", src: src });
    img.addEventListener("error", () => { img.replaceWith(el("div", { class: "muted", textContent: "(no quicklook)" })); });
    const details = el("details", { class: "provenance" }, el("summary", { textContent: "Provenance" }));
    details.addEventListener("toggle", () => { if (details.open && !details.dataset.loaded) loadProvenance(details, o.path); });
    return el("li", { class: "output", "data-path": o.path }, img,
      el("a", { href: "/files/" + o.path.split("/").map(encodeURIComponent).join("/"), textContent: o.path }),
      el("div", { class: "meta", textContent: `${o.tool} · ${o.time}` }), details);
  }

  // An output's provenance record and lineage (/console/provenance), loaded when its details are opened.
  async function loadProvenance(details, path) {
    details.dataset.loaded = "1";
    const box = el("div", { class: "provenance-body muted", textContent: "loading…" });
    details.append(box);
    try {
      const r = await fetch("/console/provenance?path=" + encodeURIComponent(path), { credentials: "same-origin" });
      const p = await r.json();
      if (!r.ok) { box.textContent = "no provenance: " + ((p.error || {}).message || r.statusText); return; }
      const rec = p.record;
      const parts = [];
      if (rec) {
        const approval = rec["x-gdal-mcp:approval"];
        parts.push(el("div", { class: "record", textContent:
          `${rec.operation} ${JSON.stringify(rec.parameters)} · ${rec.started_at} → ${rec.finished_at}` +
          ` · approved: ${approval ? approval.who + " at " + approval.when : "not asked"}` }));
        for (const i of rec.inputs || []) {
          parts.push(el("div", { class: "input mono", textContent: `input ${i.path} sha256 ${i.sha256.slice(0, 16)}… ${i.crs || ""}` }));
        }
        parts.push(el("div", { class: "output-digest mono", textContent: `output sha256 ${rec.output.sha256.slice(0, 16)}… ${rec.output.crs || ""}` }));
      } else {
        parts.push(el("div", { textContent: "no provenance record beside this file" }));
      }
      const steps = p.lineage.steps.map((s) => `${s.operation || "original"}(${s.path})`).join(" → ");
      parts.push(el("div", { class: "lineage", textContent: "lineage: " + steps }));
      parts.push(el("img", { class: "lineage-graph", alt: "lineage of " + path, src: p.graph }));
      box.className = "provenance-body";
      box.replaceChildren(...parts);
    } catch (e) {
      box.textContent = "could not load the provenance";
    }
  }

  function auditItem(r) {
    let text;
    if (r.event === "confirmation") {
      text = `${r.time} confirmation ${r.tool}: ${r.answer} (${r.channel}${r.token ? " " + r.token : ""}) — ${r.shown}`;
    } else {
      text = `${r.time} ${r.tool} → ${r.outcome} ${Math.round(r.duration_ms)} ms ${JSON.stringify(r.arguments)}`;
    }
    return el("li", { class: "audit", textContent: text });
  }

  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const r = await fetch("/console/state", { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401) { location.href = "/console"; return; }
      const s = await r.json();
      if ((s.role === "approver") !== approver) { approver = s.role === "approver"; for (const k in last) delete last[k]; }
      $("viewer-note").hidden = approver;
      draw("pending", s.pending.filter((p) => p.status === "pending"), pendingCard, "pending-empty");
      draw("decided", s.pending.filter((p) => p.status !== "pending"), decidedItem);
      // a running job's clock is not redrawn every second: its Cancel button stays put under the pointer
      draw("jobs", s.jobs.map((j) => (j.status === "running" ? { ...j, seconds: null } : j)), jobRow, "jobs-empty");
      draw("outputs", s.outputs, outputItem, "outputs-empty");
      draw("audit", s.audit, auditItem);
      $("status").textContent = "live · " + s.now;
    } catch (e) {
      $("status").textContent = "server unreachable, retrying…";
    } finally {
      busy = false;
    }
  }

  $("logout").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await fetch("/console/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
    location.href = "/console";
  });
  refresh();
  setInterval(refresh, POLL_MS);
})();
