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
    return el("li", { class: "output", "data-path": o.path }, img,
      el("a", { href: "/files/" + o.path.split("/").map(encodeURIComponent).join("/"), textContent: o.path }),
      el("div", { class: "meta", textContent: `${o.tool} · ${o.time}` }));
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
