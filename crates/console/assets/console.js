// The agentsessions console: a single page over the JSON API under /api/v1.
//
// Every piece of data reaches the page as text (textContent, element attributes set one by
// one): nothing from a session is ever parsed as HTML, and the Content-Security-Policy allows
// no inline script, so a record that contains markup shows that markup as characters.
"use strict";

(function () {
  const API = "/api/v1";
  const CSRF_HEADER = "X-Agentsessions-Csrf";
  const TOKEN_KEY = "agentsessions.token";
  const RECORD_PAGE = 500;
  const MAX_FIRST_LOAD = 20000;

  // The view being shown; replaced on every navigation, which stops its live stream.
  let current = { stop() {} };

  // ---- DOM: elements from text only -------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else if (name === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function view() { return document.getElementById("view"); }

  function showError(message) {
    const box = document.getElementById("error");
    box.textContent = message || "";
    box.hidden = !message;
  }

  // ---- API -----------------------------------------------------------------------------------

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    if (token()) h.Authorization = "Bearer " + token();
    return h;
  }

  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  async function api(method, path, body) {
    const init = { method, headers: headers(), credentials: "same-origin" };
    if (method !== "GET") {
      init.headers[CSRF_HEADER] = "1";
      if (body !== undefined) {
        init.headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(body);
      }
    }
    const response = await fetch(API + path, init);
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(response.status, err.code || String(response.status), err.message || response.statusText);
    }
    return data;
  }

  function enc(s) { return encodeURIComponent(s); }

  // ---- formatting ------------------------------------------------------------------------------

  function shortName(enumName, prefix) { return (enumName || "").replace(prefix, ""); }
  function execState(s) { return shortName(s.exec_state, "EXEC_") || "—"; }
  function compute(s) { return shortName(s.compute_state, "COMPUTE_") || "—"; }
  function uidOf(s) { return (s.metadata && s.metadata.uid) || ""; }
  function nameOf(s) { return (s.metadata && s.metadata.name) || ""; }
  function json(value) { return JSON.stringify(value, null, 2); }
  function ownerText(o) { return o && o.subject ? o.subject : ""; }

  function textOf(message) {
    return (message && message.parts || []).filter(p => p.text).map(p => p.text.text || "").join("");
  }

  function sessionLink(uid, label) { return el("a", { href: "#/sessions/" + enc(uid) }, label || uid); }

  function sizeText(n) {
    n = Number(n || 0);
    return n < 1024 ? n + " B" : n < 1048576 ? (n / 1024).toFixed(1) + " KiB" : (n / 1048576).toFixed(1) + " MiB";
  }

  // A tool result's content as the API describes it (extensions §10): text, images (data: URLs
  // the server size-capped), resource links with their MIME type, structured content folded.
  function contentViews(views) {
    return views.map(v => {
      if (v.kind === "text") return el("pre", { class: "result" }, v.text);
      if (v.kind === "image") {
        return v.src
          ? el("img", { class: "tool-image", src: v.src, alt: v.mime + ", " + sizeText(v.bytes) })
          : el("div", { class: "muted" }, "image " + v.mime + ", " + sizeText(v.bytes) + " (not shown)");
      }
      if (v.kind === "file") {
        return el("div", { class: "muted" }, "file " + [v.name, v.mime, v.uri || sizeText(v.bytes)].filter(Boolean).join(" "));
      }
      if (v.kind === "resource_link") {
        // Only web links are clickable; other schemes (file:, test:) are shown as text.
        const target = /^https?:\/\//i.test(v.uri)
          ? el("a", { href: v.uri, target: "_blank", rel: "noopener noreferrer" }, v.uri)
          : el("code", {}, v.uri);
        return el("div", { class: "resource-link" }, "link " + (v.name || "") + " ", target,
          " (" + (v.mime || "MIME type not given") + ")", v.description ? " — " + v.description : "");
      }
      if (v.kind === "resource") {
        const head = "resource " + v.uri + " (" + (v.mime || "MIME type not given") + ", " + sizeText(v.bytes) + ")";
        return v.text === undefined
          ? el("div", { class: "muted" }, head + " binary, not shown")
          : el("details", {}, el("summary", {}, head), el("pre", { class: "result" }, v.text));
      }
      return el("details", { class: "json" }, el("summary", {}, v.label || "data"), el("pre", { class: "result" }, json(v.value)));
    });
  }

  // What one record says, as nodes made from its text.
  function detail(event, toolContent) {
    const out = [];
    if (!event) return out;
    if (event.message) {
      const m = event.message;
      out.push(el("span", { class: "role" }, (m.role || "") + ": "), textOf(m));
      for (const part of m.parts || []) {
        if (part.tool_call) out.push(el("div", {}, "→ calls " + part.tool_call.tool), el("pre", {}, json(part.tool_call.args || {})));
        if (part.tool_result) out.push(el("div", {}, "← result of " + part.tool_result.id), el("pre", {}, json(part.tool_result)));
        if (part.data) out.push(el("pre", {}, json(part.data.data)));
        if (part.file) out.push(el("div", {}, "file " + (part.file.name || part.file.uri || part.file.mime || "")));
      }
    } else if (event.model) {
      out.push("model=" + (event.model.model || ""));
    } else if (event.tool) {
      const t = event.tool;
      out.push(el("strong", {}, t.tool || ""), " id=" + (t.id || "") + " " + shortName(t.mediation, "MEDIATION_").toLowerCase());
      out.push(el("pre", { class: "args" }, json(t.args || {})));
    } else if (event.result) {
      const r = event.result;
      out.push("id=" + (r.id || "") + " ", el("span", { class: r.is_error ? "bad" : "ok" }, r.is_error ? "error" : "ok"));
      if (r.code) out.push(" " + r.code);
      if (r.error) out.push(el("div", { class: "bad" }, r.error));
      if (toolContent) {
        out.push(contentViews(toolContent));
      } else {
        const text = (r.content || []).filter(p => p.text).map(p => p.text.text).join("\n");
        if (text) out.push(el("pre", { class: "result" }, text));
        if (r.output) out.push(el("pre", { class: "result" }, json(r.output)));
      }
    } else if (event.approval) {
      out.push("tool_call=" + (event.approval.tool_call_id || ""));
      if (event.approval.reason) out.push(" — " + event.approval.reason);
    } else if (event.approval_result) {
      const a = event.approval_result;
      out.push(el("span", { class: a.approved ? "ok" : "bad" }, a.approved ? "approved" : "denied"), " request_seq=" + (a.request_seq || ""));
      if (a.reason) out.push(" reason: " + a.reason);
      if (event.actor && (event.actor.subject || event.actor.principal)) out.push(" by " + (event.actor.subject || event.actor.principal));
    } else if (event.usage) {
      const u = event.usage;
      out.push("model=" + (u.model || "") + " input=" + (u.input_tokens || 0) + " output=" + (u.output_tokens || 0));
      if (u.cached_input_tokens) out.push(" cached=" + u.cached_input_tokens);
      if (u.reasoning_tokens) out.push(" reasoning=" + u.reasoning_tokens);
    } else if (event.lifecycle) {
      out.push(shortName(event.lifecycle.kind, "LIFECYCLE_") + (event.lifecycle.detail ? " " + event.lifecycle.detail : ""));
    } else if (event.end) {
      out.push(el("span", { class: event.end.state === "COMPLETED" ? "ok" : "bad" }, event.end.state || ""));
      if (event.end.error) out.push(" " + (event.end.error.description || ""));
    } else if (event.error) {
      out.push(el("span", { class: "bad" }, "code=" + (event.error.code || 0) + " " + (event.error.description || "")));
    } else if (event.execution_start) {
      const s = event.execution_start;
      out.push("inputs=" + (s.input_count || 0) + (s.harness ? " harness=" + s.harness : "") + (s.model ? " model=" + s.model : ""));
    } else if (event.parked) {
      out.push("waiting for approval of " + (event.parked.tool_call_id || ""));
    }
    return out;
  }

  function recordRow(record) {
    const kind = shortName(record.event && record.event.kind, "EVENT_");
    return el("tr", { class: "record", dataset: { seq: record.seq, kind } },
      el("td", { class: "seq" }, String(record.seq)),
      el("td", { class: "time" }, record.commit_time || ""),
      el("td", { class: "kind" }, kind),
      el("td", { class: "detail" }, detail(record.event, record.tool_content)));
  }

  // ---- live records: Server-Sent Events read with fetch (so the token header goes along) ------

  // "time__slow: 2/4 — step 2", as agentctl prints it.
  function progressText(p) {
    const counted = p.total === undefined || p.total === null ? String(p.progress) : p.progress + "/" + p.total;
    return p.tool + ": " + counted + (p.message ? " — " + p.message : "");
  }

  function follow(uid, from, handlers) {
    const controller = new AbortController();
    let next = from;
    let stopped = false;
    async function run() {
      let backoff = 500;
      while (!stopped) {
        try {
          const response = await fetch(API + "/sessions/" + enc(uid) + "/events?from=" + next,
            { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
          if (!response.ok) {
            handlers.status("stopped (" + response.status + ")");
            return;
          }
          handlers.status("live");
          backoff = 500;
          const reader = response.body.getReader();
          const decoder = new TextDecoder();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
            let cut;
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              const block = buffer.slice(0, cut);
              buffer = buffer.slice(cut + 2);
              let type = "message";
              const data = [];
              for (const line of block.split("\n")) {
                if (line.startsWith("event:")) type = line.slice(6).trim();
                else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
              }
              if (type === "record") {
                const record = JSON.parse(data.join("\n"));
                next = Number(record.seq) + 1;
                handlers.record(record);
              } else if (type === "progress") {
                // A running tool's progress (extensions §11): shown, never kept.
                if (handlers.progress) handlers.progress(JSON.parse(data.join("\n")));
              } else if (type === "end") {
                handlers.status("session deleted");
                stopped = true;
                return;
              } else if (type === "error") {
                const body = JSON.parse(data.join("\n"));
                handlers.status("stopped: " + ((body.error && body.error.message) || "error"));
                stopped = true;
                return;
              }
            }
          }
        } catch (err) {
          if (stopped) return;
        }
        if (stopped) return;
        handlers.status("reconnecting…");
        await new Promise(r => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10000);
      }
    }
    run();
    return { stop() { stopped = true; controller.abort(); } };
  }

  // ---- views -------------------------------------------------------------------------------------

  const STATES = ["", "PENDING", "RUNNING", "AWAITING", "COMPLETED", "FAILED", "CANCELED", "INTERRUPTED"];

  async function sessionsView(params) {
    const root = clear(view());
    const form = el("form", { class: "filters", id: "filters" });
    const field = (name, placeholder) => el("input", { name, placeholder, value: params.get(name) || "" });
    const state = el("select", { name: "state" }, STATES.map(s => el("option", { value: s, selected: (params.get("state") || "") === s }, s || "any state")));
    append(form, [field("q", "uid or name"), field("project", "project"), state, field("harness", "harness"), field("owner", "owner"), el("button", { type: "submit" }, "Filter")]);
    form.addEventListener("submit", ev => {
      ev.preventDefault();
      const next = new URLSearchParams();
      for (const [k, v] of new FormData(form).entries()) if (v) next.set(k, v);
      location.hash = "#/?" + next.toString();
    });
    const table = el("table", { id: "sessions" }, el("thead", {}, el("tr", {},
      ["uid", "name", "state", "compute", "harness", "last seq", "owner", "created"].map(h => el("th", {}, h)))));
    const body = el("tbody");
    table.appendChild(body);
    const pager = el("div", { class: "actions" });
    append(root, [el("h1", {}, "Sessions"), form, table, pager]);

    const query = new URLSearchParams(params);
    const data = await api("GET", "/sessions?" + query.toString());
    for (const s of data.sessions) {
      body.appendChild(el("tr", { class: "session-row", dataset: { uid: uidOf(s) } },
        el("td", {}, sessionLink(uidOf(s))),
        el("td", {}, nameOf(s)),
        el("td", {}, el("span", { class: "badge " + execState(s) }, execState(s))),
        el("td", {}, compute(s)),
        el("td", {}, s.harness || ""),
        el("td", {}, String(s.last_seq || 0)),
        el("td", {}, ownerText(s.owner)),
        el("td", { class: "time" }, (s.metadata && s.metadata.create_time) || "")));
    }
    if (!data.sessions.length) body.appendChild(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No sessions.")));
    if (params.get("page_token")) {
      pager.appendChild(el("button", { on: { click: () => history.back() } }, "← Previous"));
    }
    if (data.next_page_token) {
      const next = new URLSearchParams(params);
      next.set("page_token", data.next_page_token);
      pager.appendChild(el("a", { href: "#/?" + next.toString(), id: "next-page" }, "Next page →"));
    }
  }

  async function approvalsView(params) {
    const root = clear(view());
    const project = params.get("project") || "";
    const form = el("form", { class: "filters", id: "approval-filters" },
      el("input", { name: "project", placeholder: "project", value: project }),
      el("button", { type: "submit" }, "Filter"));
    form.addEventListener("submit", ev => {
      ev.preventDefault();
      const value = new FormData(form).get("project");
      location.hash = "#/approvals" + (value ? "?project=" + enc(value) : "");
    });
    const list = el("div", { id: "approval-list" });
    const pager = el("div", { class: "actions" });
    append(root, [el("h1", {}, "Pending approvals"), form, list, pager]);
    // Every page, one after the other on request, so no approval is out of reach.
    async function more(token) {
      clear(pager);
      const query = new URLSearchParams();
      if (project) query.set("project", project);
      if (token) query.set("page_token", token);
      const data = await api("GET", "/approvals?" + query.toString());
      for (const a of data.approvals) list.appendChild(approvalPanel(a, () => approvalsView(params)));
      if (!list.children.length) {
        list.appendChild(el("p", { class: "muted", id: "no-approvals" }, "Nothing waits for a decision."));
      }
      if (data.next_page_token) {
        pager.appendChild(el("button", { id: "more-approvals", on: { click: () => more(data.next_page_token).catch(err => showError(err.message)) } }, "More →"));
      }
    }
    await more("");
  }

  // One pending approval with the tool, its arguments and the reason; buttons when the viewer may
  // decide it.
  function approvalPanel(a, after) {
    const reason = el("input", { class: "reason", placeholder: "reason (optional)" });
    const decide = async approved => {
      for (const b of panel.querySelectorAll("button")) b.disabled = true;
      try {
        const result = await api("POST", "/sessions/" + enc(a.session_uid) + "/decision", {
          approved, reason: reason.value, execution_id: a.execution_id, tool_call_id: a.tool_call_id, request_seq: Number(a.request_seq),
        });
        showError(result.resume_error ? "decision recorded; the turn did not resume: " + result.resume_error : "");
      } catch (err) {
        showError(err.message);
      }
      after();
    };
    const panel = el("div", { class: "panel approval-panel", dataset: { session: a.session_uid, toolCall: a.tool_call_id } },
      el("div", {}, "Session ", sessionLink(a.session_uid), " wants to call ", el("strong", { class: "tool" }, a.tool)),
      el("pre", { class: "args" }, json(a.args)),
      a.reason ? el("div", { class: "muted" }, "Why approval is needed: " + a.reason) : null,
      el("div", { class: "muted" }, "requested " + (a.requested_at || "") + " · request seq " + a.request_seq +
        (a.owner && a.owner.subject ? " · owner " + a.owner.subject : "")));
    if (a.can_decide) {
      panel.appendChild(el("div", { class: "actions" }, reason,
        el("button", { class: "approve", on: { click: () => decide(true) } }, "Approve"),
        el("button", { class: "deny", on: { click: () => decide(false) } }, "Deny")));
    } else {
      panel.appendChild(el("div", { class: "muted" }, "You may not decide this request."));
    }
    return panel;
  }

  function treeList(node, uid) {
    const item = el("li", { class: node.uid === uid ? "current" : "", dataset: { uid: node.uid } },
      sessionLink(node.uid, node.uid),
      node.name ? " (" + node.name + ")" : "",
      node.parent_uid ? el("span", { class: "muted" }, " @" + node.fork_seq) : "",
      el("span", { class: "muted" }, " last " + node.last_seq + " " + (node.exec_state || "")));
    if (node.children && node.children.length) {
      item.appendChild(el("ul", {}, node.children.map(child => treeList(child, uid))));
    }
    return item;
  }

  async function download(uid) {
    const response = await fetch(API + "/sessions/" + enc(uid) + "/audit", { headers: headers() });
    if (!response.ok) throw new Error("audit export failed (" + response.status + ")");
    const blob = await response.blob();
    const link = el("a", { href: URL.createObjectURL(blob), download: uid + ".audit.json" });
    document.body.appendChild(link);
    link.click();
    link.remove();
  }

  async function sessionView(uid) {
    const root = clear(view());
    const shown = await api("GET", "/sessions/" + enc(uid));
    const header = el("div", { id: "session-header" });
    const actions = el("div", { class: "actions", id: "session-actions" });
    const approval = el("div", { id: "approval" });
    const next = el("div", { id: "next-step-slot" });
    const chain = el("div", { id: "chain-status", class: "muted" }, "verifying chain…");
    const live = el("span", { id: "live-status", class: "idle" }, "");
    const progress = el("div", { id: "tool-progress", class: "muted" }, "");
    const rows = el("tbody", { id: "records" });
    const timeline = el("table", { id: "timeline" },
      el("thead", {}, el("tr", {}, ["seq", "committed", "kind", ""].map(h => el("th", {}, h)))), rows);
    const tree = el("div", { id: "fork-tree", class: "panel" }, el("h2", {}, "Fork tree"));
    append(root, [header, actions, next, approval, el("div", { class: "grid" },
      el("div", {}, el("h2", {}, "Timeline ", live), progress, timeline),
      el("div", {}, el("div", { class: "panel" }, el("h2", {}, "Hash chain"), chain), tree))]);

    let session = shown.session;
    let permissions = shown.permissions;
    let nextStep = shown.next_step;
    let lastSeq = 0;

    function drawHeader() {
      clear(header);
      append(header, [
        el("h1", {}, nameOf(session) ? nameOf(session) + " · " : "", uid),
        el("div", {},
          el("span", { class: "badge " + execState(session), id: "exec-state" }, execState(session)),
          el("span", { class: "badge" }, "compute " + compute(session)),
          el("span", { class: "badge" }, "harness " + (session.harness || "")),
          session.model ? el("span", { class: "badge" }, "model " + session.model) : null,
          el("span", { class: "badge" }, "last seq " + (session.last_seq || 0)),
          session.deletion_state === "DELETION_PENDING" ? el("span", { class: "badge FAILED" }, "deletion pending") : null,
          session.parent_uid ? el("span", {}, " forked from ", sessionLink(session.parent_uid), " @" + session.fork_seq) : null,
          session.owner && session.owner.subject ? el("span", { class: "muted" }, " owner " + session.owner.subject) : null,
          session.usage ? el("span", { class: "muted" }, " · tokens in " + (session.usage.input_tokens || 0) + " out " + (session.usage.output_tokens || 0)) : null),
      ]);
      drawActions();
      drawNextStep();
    }

    // A turn that has not ended: what state it is in and the one action that moves it on (and,
    // for a parked or interrupted turn, abandoning it instead).
    function stepButton(permission, step, label, run) {
      if (!permissions.includes(permission)) return null;
      return el("button", { dataset: { step }, on: { click: async () => {
        try { await run(); showError(""); } catch (err) { showError(err.message); }
        refresh();
      } } }, label);
    }

    function drawNextStep() {
      clear(next);
      if (!nextStep) return;
      const buttons = [];
      if (nextStep.action === "resume") {
        buttons.push(stepButton("resume", "resume", "Resume turn", () => api("POST", "/sessions/" + enc(uid) + "/resume")));
      } else if (nextStep.action === "cancel") {
        buttons.push(stepButton("cancel", "cancel", "Cancel turn", () => api("POST", "/sessions/" + enc(uid) + "/cancel", {})));
      } else if (nextStep.action === "decide") {
        buttons.push(el("span", { class: "muted" }, permissions.includes("approve") ? "Approve or deny the call below." : "You may not decide the call."));
      }
      if (nextStep.instead === "abandon") {
        buttons.push(stepButton("cancel", "abandon", "Abandon turn", async () => {
          if (!window.confirm("Abandon this turn? Its open tool calls are recorded as outcome unknown (or not run), and it ends CANCELED.")) return;
          await api("POST", "/sessions/" + enc(uid) + "/cancel", { reason: "abandoned from the console" });
        }));
      }
      append(next, [el("div", { class: "panel next-step", id: "next-step", dataset: { state: nextStep.state, action: nextStep.action } },
        el("strong", {}, nextStep.state), " ", el("span", { class: "says" }, nextStep.says),
        el("div", { class: "actions" }, buttons))]);
    }

    function act(name, label, run) {
      if (!permissions.includes(name)) return null;
      return el("button", { dataset: { action: name }, on: { click: async () => {
        try { await run(); showError(""); } catch (err) { showError(err.message); }
        refresh();
      } } }, label);
    }

    function drawActions() {
      clear(actions);
      const forkAt = el("input", { id: "fork-at", size: 5, placeholder: "at seq" });
      append(actions, [
        act("cancel", "Cancel turn", () => api("POST", "/sessions/" + enc(uid) + "/cancel", {})),
        act("suspend", "Suspend", () => api("POST", "/sessions/" + enc(uid) + "/suspend")),
        act("resume", "Resume", () => api("POST", "/sessions/" + enc(uid) + "/resume")),
        permissions.includes("fork") ? forkAt : null,
        act("fork", "Fork", async () => {
          const at = Number(forkAt.value || 0);
          const made = await api("POST", "/sessions/" + enc(uid) + "/fork", { at_seq: at, count: 1 });
          if (made.children.length) location.hash = "#/sessions/" + enc(uidOf(made.children[0]));
        }),
        act("delete", "Delete", async () => {
          if (!window.confirm("Delete session " + uid + "? Its records stay in the journal; the session can no longer run.")) return;
          await api("DELETE", "/sessions/" + enc(uid));
        }),
        el("button", { id: "export-audit", on: { click: () => download(uid).catch(err => showError(err.message)) } }, "Export audit bundle"),
      ]);
    }

    async function drawApproval() {
      clear(approval);
      if (!session.pending_approval) return;
      const data = await api("GET", "/approvals?session=" + enc(uid));
      const pending = data.approvals.find(a => a.session_uid === uid);
      if (pending) approval.appendChild(approvalPanel(pending, refresh));
    }

    async function drawChain() {
      try {
        const v = await api("GET", "/sessions/" + enc(uid) + "/verify");
        chain.className = v.verified ? "ok" : "bad";
        chain.textContent = v.verified
          ? "verified: " + v.records + " records, every hash and link checks out (head " + (v.head_hash || "").slice(0, 16) + "…)"
          : "does NOT verify: " + v.problem;
      } catch (err) { chain.textContent = err.message; }
    }

    async function drawTree() {
      try {
        const t = await api("GET", "/sessions/" + enc(uid) + "/tree");
        clear(tree);
        append(tree, [el("h2", {}, "Fork tree"), el("ul", {}, treeList(t.root, uid))]);
      } catch (err) { tree.appendChild(el("div", { class: "bad" }, err.message)); }
    }

    let refreshing = null;
    async function refresh() {
      if (refreshing) return;
      refreshing = setTimeout(async () => {
        refreshing = null;
        try {
          const again = await api("GET", "/sessions/" + enc(uid));
          session = again.session;
          permissions = again.permissions;
          nextStep = again.next_step;
          drawHeader();
          await drawApproval();
          await drawTree();
        } catch (err) { showError(err.message); }
      }, 150);
    }

    function add(record, fresh) {
      if (Number(record.seq) <= lastSeq) return;
      lastSeq = Number(record.seq);
      const row = recordRow(record);
      if (fresh) row.classList.add("fresh");
      rows.appendChild(row);
    }

    drawHeader();
    drawApproval().catch(err => showError(err.message));
    drawTree();
    let from = 1;
    let loaded = 0;
    for (;;) {
      const page = await api("GET", "/sessions/" + enc(uid) + "/records?from=" + from + "&limit=" + RECORD_PAGE);
      for (const r of page.records) add(r, false);
      loaded += page.records.length;
      if (!page.next_seq || loaded >= MAX_FIRST_LOAD) break;
      from = page.next_seq;
    }
    drawChain();
    let chainTimer = null;
    const stream = follow(uid, lastSeq + 1, {
      record(record) {
        add(record, true);
        // A tool's result (or the turn's end) ends what its progress said.
        const kind = (record.event && record.event.kind) || "";
        if (/TOOL_RESULT|_END|_ERROR/.test(kind)) progress.textContent = "";
        refresh();
        clearTimeout(chainTimer);
        chainTimer = setTimeout(drawChain, 500);
      },
      progress(p) {
        progress.textContent = progressText(p);
      },
      status(text) {
        live.textContent = text === "live" ? "● live" : text;
        live.className = text === "live" ? "live" : "idle";
      },
    });
    return { stop() { stream.stop(); clearTimeout(chainTimer); } };
  }

  // ---- routing and the header --------------------------------------------------------------------

  async function route() {
    current.stop();
    current = { stop() {} };
    showError("");
    const hash = location.hash || "#/";
    try {
      if (hash.startsWith("#/sessions/")) {
        const uid = decodeURIComponent(hash.slice("#/sessions/".length));
        const shown = await sessionView(uid);
        if (shown) current = shown;
      } else if (hash.startsWith("#/approvals")) {
        const q = hash.indexOf("?");
        await approvalsView(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ""));
      } else {
        const q = hash.indexOf("?");
        await sessionsView(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ""));
      }
    } catch (err) {
      clear(view()).appendChild(el("p", { class: "bad", id: "view-error" },
        err.status === 404 ? "Not found." : err.status === 401 ? "Sign in with a bearer token to continue." : err.message));
    }
  }

  async function whoami() {
    const who = document.getElementById("whoami");
    try {
      const me = await api("GET", "/me");
      who.textContent = me.authenticated ? "signed in as " + me.subject : "anonymous";
    } catch (err) {
      who.textContent = err.status === 401 ? "not signed in" : "";
    }
  }

  function start() {
    document.getElementById("token-form").addEventListener("submit", ev => {
      ev.preventDefault();
      const input = document.getElementById("token-input");
      if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      input.value = "";
      whoami();
      route();
    });
    document.getElementById("token-clear").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      whoami();
      route();
    });
    window.addEventListener("hashchange", route);
    whoami();
    route();
  }

  start();
})();
