// The JobManager web UI: a client of the public REST API only (no build step).
"use strict";

const REFRESH_MS = 1500;
const PAGE = 50;  // jobs per page of the jobs table
const TERMINAL = ["FINISHED", "FAILED", "CANCELED"];
const STATES = ["CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "CANCELLING", "CANCELED",
                "FAILED", "FINISHED"];
let timer = null;
let current = null;  // {name, render, refresh}

// ---- helpers --------------------------------------------------------------------------
const $ = (sel, root) => (root || document).querySelector(sel);
const esc = (v) => String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g,
  (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const badge = (s) => `<span class="badge s-${esc(s)}">${esc(s)}</span>`;
const when = (ms) => (ms === undefined || ms === null || ms < 0) ? "-" :
  new Date(ms).toLocaleTimeString();
function dur(ms) {
  if (ms === undefined || ms === null || ms < 0) return "-";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${(ms / 1000).toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}
// an attempt's Spark application: its id (linked to its UI while it runs) and a waiting note
const sparkApp = (a) => {
  if (!a["spark-app-id"]) return "";
  const running = a["end-time"] === undefined || a["end-time"] === null || a["end-time"] < 0;
  const ui = running ? a["spark-ui"] : null;
  const id = ui && /^https?:\/\//.test(ui)
    ? `<a href="${esc(ui)}" target="_blank" rel="noopener">${esc(a["spark-app-id"])}</a>`
    : esc(a["spark-app-id"]);
  return a["spark-waiting"] ? `${id} <span class="warn">${esc(a["spark-waiting"])}</span>` : id;
};

// a streaming job's last progress (its StreamingQueryListener): one row per query
const num = (v, d) => (typeof v === "number") ? v.toFixed(d) : "-";
function showProgress(p) {
  const queries = (p && p.queries) || [];
  $("#progress-card").classList.toggle("hidden", !queries.length);
  if (!queries.length) return;
  $("#progress-when").textContent = `reported ${when(p.time)}`;
  $("#progress tbody").innerHTML = queries.map((q) => `<tr><td>${esc(q.name)}</td>
    <td>${num(q.batch, 0)}</td><td>${when(q.time)}</td>
    <td>${num(q["input-rows-per-second"], 1)}</td><td>${num(q["processed-rows-per-second"], 1)}</td>
    <td>${typeof q["batch-duration-ms"] === "number" ? dur(q["batch-duration-ms"]) : "-"}</td>
    <td>${num(q["state-rows"], 0)}</td></tr>`).join("");
}

class ApiError extends Error {
  constructor(status, errors) { super(errors.join("; ")); this.status = status; }
}

// the highest X-JM-Index seen: what this page has read or written must stay visible
let minIndex = 0;

// a submission is sent with an X-Request-Id; one that got no answer (a network error, a
// 503 whose outcome is unknown) and is sent again unchanged keeps its id, so the cluster
// runs it once (POST /jobs answers the job the first try made)
let pendingSubmit = null;

function requestId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);  // (crypto.randomUUID needs https or localhost)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function api(method, path, body, raw, extra) {
  const headers = Object.assign({}, extra || {});
  if (minIndex > 0) headers["X-JM-Min-Index"] = String(minIndex);
  const token = localStorage.getItem("jm-token");
  if (token) headers["Authorization"] = `Bearer ${token}`;
  let payload;
  if (raw) { payload = raw; }
  else if (body !== undefined) { payload = JSON.stringify(body); headers["Content-Type"] = "application/json"; }
  const resp = await fetch(path, {method, headers, body: payload});
  const index = parseInt(resp.headers.get("X-JM-Index") || "", 10);
  if (index > minIndex) minIndex = index;
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = text; }
  if (resp.status === 401) { showToken(); throw new ApiError(401, (data && data.errors) || ["unauthorized"]); }
  if (!resp.ok) throw new ApiError(resp.status, (data && data.errors) || [`HTTP ${resp.status}`]);
  return data;
}

function showToken() { $("#token-box").classList.remove("hidden"); }

function confirmAction(text) {
  const dlg = $("#confirm");
  $("#confirm-text").textContent = text;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), {once: true});
    dlg.showModal();
  });
}

function setStatus(text) { $("#status").textContent = text; }

// ---- views ----------------------------------------------------------------------------
const views = {
  cluster: {
    template: "tpl-cluster",
    setup() {
      $("#btn-rebalance").onclick = async () => {
        try {
          const r = await api("POST", "/cluster/rebalance");
          $("#rebalance-out").textContent = r.moves.length ?
            r.moves.map((m) => `${m.job.slice(0, 8)}: ${m.from} → ${m.to}`).join(", ") :
            "balanced: nothing to move";
        } catch (e) { $("#rebalance-out").textContent = e.message; }
      };
    },
    async refresh() {
      const [ov, nodes] = await Promise.all([api("GET", "/overview"), api("GET", "/nodes")]);
      let term = "";
      try {
        const m = await api("GET", "/metrics");
        const t = /^jm_raft_term(?:\{[^}]*\})? (\d+)/m.exec(m),
          c = /^jm_raft_commit_index(?:\{[^}]*\})? (\d+)/m.exec(m);
        if (t && c) term = `<div><b>${t[1]}</b><span>Raft term</span></div>` +
                           `<div><b>${c[1]}</b><span>commit index</span></div>`;
      } catch (e) { /* metrics are optional */ }
      $("#overview").innerHTML = [
        ["leader", ov.leader || "none"], ["peers alive", `${ov["peers-alive"]} / ${ov.peers}`],
        ["slots free", `${ov["slots-available"]} / ${ov["slots-total"]}`],
        ["running", ov["jobs-running"]], ["waiting", ov["jobs-waiting"]],
        ["finished", ov["jobs-finished"]], ["failed", ov["jobs-failed"]],
        ["cancelled", ov["jobs-cancelled"]], ["protocol", ov.protocol],
      ].map(([k, v]) => `<div><b>${esc(v)}</b><span>${esc(k)}</span></div>`).join("") + term;
      $("#peers tbody").innerHTML = nodes.nodes.map((n) => `
        <tr data-node="${esc(n.id)}">
          <td>${esc(n.id)}</td><td class="state">${badge(n.state)}</td>
          <td>${n.leader ? '<span class="badge leader">leader</span>' : ""}</td>
          <td>${n["slots-used"]} / ${n.slots}</td>
          <td><a href="#/jobs?node=${encodeURIComponent(n.id)}">${n.jobs.length}</a></td>
          <td>${n.ready ? "ready" : "starting"}</td>
          <td><a href="http://${esc(n.host)}:${n["rest-port"]}/">${esc(n.host)}:${n["rest-port"]}</a></td>
          <td>${n.state === "DEAD" ? "" : (n.state === "ALIVE" ?
            `<button class="danger drain" data-node="${esc(n.id)}">Drain</button>` :
            `<button class="undrain" data-node="${esc(n.id)}">End drain</button>`)}</td>
        </tr>`).join("");
      for (const b of document.querySelectorAll("button.drain")) {
        b.onclick = async () => {
          if (!await confirmAction(`Drain ${b.dataset.node}? Its streaming jobs move to other peers and it gets no new work.`)) return;
          await act(() => api("POST", `/nodes/${encodeURIComponent(b.dataset.node)}/drain`), "#rebalance-out");
        };
      }
      for (const b of document.querySelectorAll("button.undrain")) {
        b.onclick = () => act(() => api("DELETE", `/nodes/${encodeURIComponent(b.dataset.node)}/drain`), "#rebalance-out");
      }
    },
  },

  jobs: {
    template: "tpl-jobs",
    setup(params) {
      $("#f-state").innerHTML += STATES.map((s) => `<option>${s}</option>`).join("");
      $("#f-state").value = params.get("state") || "";
      $("#f-text").value = params.get("q") || "";
      this.node = params.get("node") || "";
      this.offset = 0;
      for (const id of ["#f-state", "#f-text"]) {
        $(id).oninput = () => { this.offset = 0; this.refresh(); };
      }
      $("#f-node").oninput = () => {
        this.node = $("#f-node").value; this.offset = 0; this.refresh();
      };
      $("#pg-prev").onclick = () => { this.offset = Math.max(0, this.offset - PAGE); this.refresh(); };
      $("#pg-next").onclick = () => { this.offset += PAGE; this.refresh(); };
    },
    async refresh() {
      // one page from the server, filtered there: the table costs what it shows
      const q = new URLSearchParams({ limit: PAGE, offset: this.offset });
      if ($("#f-state").value) q.set("state", $("#f-state").value);
      if ($("#f-text").value) q.set("name", $("#f-text").value);
      if (this.node) q.set("node", this.node);
      const [jobs, nodes] = await Promise.all([api("GET", `/jobs?${q}`), api("GET", "/nodes")]);
      const sel = $("#f-node");
      const chosen = this.node;
      sel.innerHTML = `<option value="">all</option>` + nodes.nodes.map((n) =>
        `<option ${n.id === chosen ? "selected" : ""}>${esc(n.id)}</option>`).join("");
      const rows = jobs.jobs;
      const last = this.offset + rows.length;
      $("#pg-info").textContent = jobs.total ? `${this.offset + 1}-${last} of ${jobs.total}` : "";
      $("#pg-prev").disabled = this.offset === 0;
      $("#pg-next").disabled = jobs["next-offset"] === null;
      $("#jobs tbody").innerHTML = rows.map((j) => `
        <tr data-job="${esc(j.jid)}">
          <td><a href="#/job/${encodeURIComponent(j.jid)}">${esc(j.jid.slice(0, 12))}</a></td>
          <td>${esc(j.name)}</td><td class="state">${badge(j.state)}</td>
          <td>${esc(j.node || "-")}</td><td>${j.attempt}</td><td>${j.restarts}</td>
          <td>${when(j["start-time"])}</td><td>${dur(j.duration)}</td></tr>`).join("") ||
        `<tr><td colspan="8" class="muted">no jobs</td></tr>`;
    },
  },

  job: {
    template: "tpl-job",
    setup(params, id) {
      this.id = id;
      const path = `/jobs/${encodeURIComponent(id)}`;
      $("#btn-cancel").onclick = async () => {
        if (!await confirmAction(`Cancel job ${id}?`)) return;
        await act(() => api("PATCH", `${path}?mode=cancel`), "#action-out");
      };
      $("#btn-savepoint").onclick = () => act(async () => {
        const r = await api("POST", `${path}/savepoints`, {});
        return `savepoint requested (${r["request-id"].slice(0, 8)})`;
      }, "#action-out");
      $("#btn-stop").onclick = async () => {
        if (!await confirmAction(`Stop job ${id} with a savepoint? It ends FINISHED.`)) return;
        await act(async () => {
          const r = await api("POST", `${path}/stop`, {});
          return `stop requested (${r["request-id"].slice(0, 8)})`;
        }, "#action-out");
      };
    },
    async refresh() {
      const path = `/jobs/${encodeURIComponent(this.id)}`;
      const [j, ex, sps] = await Promise.all([api("GET", path), api("GET", `${path}/exceptions`),
                                              api("GET", `${path}/savepoints`)]);
      $("#job-title").innerHTML = `${esc(j.name)} <span class="muted">${esc(j.jid)}</span>`;
      $("#job-facts").innerHTML = [
        ["state", badge(j.state) + (j["spark-waiting"]
          ? ` <span class="warn" title="${esc(j["spark-waiting"])}">waiting for Spark resources</span>`
          : "")], ["peer", esc(j.node || "-")], ["attempt", j.attempt],
        ["restarts", j.restarts], ["moves", j.moves || 0], ["type", esc(j["job-type"])],
        ["started", when(j["start-time"])], ["duration", dur(j.duration)],
      ].map(([k, v]) => `<div><b class="${k === "state" ? "state" : ""}">${v}</b><span>${k}</span></div>`).join("");
      const ended = TERMINAL.includes(j.state);
      $("#btn-cancel").disabled = ended;
      $("#btn-savepoint").disabled = ended || j["job-type"] !== "streaming";
      $("#btn-stop").disabled = ended || j["job-type"] !== "streaming";
      $("#attempts tbody").innerHTML = j.attempts.map((a) => `<tr><td>${a.attempt}</td>
        <td>${esc(a.node)}</td><td>${when(a["start-time"])}</td><td>${when(a["end-time"])}</td>
        <td>${esc(a["end-reason"] || "")}</td><td>${sparkApp(a)}</td></tr>`).join("");
      showProgress(j.progress);
      $("#result").textContent = j.state === "FINISHED" ? JSON.stringify(j.result, null, 2) : "-";
      $("#spec").textContent = JSON.stringify(j.spec, null, 2);
      $("#exceptions").innerHTML = ex["all-exceptions"].length ? ex["all-exceptions"].map((e) =>
        `<details><summary>attempt ${e.attempt} on ${esc(e.node)} at ${when(e.timestamp)}:
          ${esc(e.exception)}${e.final ? " (final)" : ""}${e.failure === false ? " (not a failure)" : ""}</summary>
          <pre>${esc(e.stacktrace)}</pre></details>`).join("") : "none";
      $("#savepoints tbody").innerHTML = sps.savepoints.map((s) => {
        const op = s.operation || {};
        const where = op.location || (op["failure-cause"] ? op["failure-cause"]["stack-trace"] : "");
        return `<tr><td>${esc(s["request-id"].slice(0, 12))}</td><td>${s.stop ? "stop" : "savepoint"}</td>
          <td>${badge(s.status.id)}</td><td class="wrap">${esc(where)}</td></tr>`;
      }).join("") || `<tr><td colspan="4" class="muted">none</td></tr>`;
      if (j.attempts.length) {
        try {
          const lg = await api("GET", `${path}/logs?tail=200`);
          const box = $("#log");
          const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
          box.textContent = lg.text || "(empty)";
          if (atEnd) box.scrollTop = box.scrollHeight;
          $("#log-which").textContent = `attempt ${lg.attempt} on ${lg.node}`;
        } catch (e) { $("#log").textContent = e.message; }
      }
    },
  },

  submit: {
    template: "tpl-submit",
    setup() {
      $("#submit-form").onsubmit = async (ev) => {
        ev.preventDefault();
        await act(async () => {
          const spec = {};
          let args = {};
          try { args = JSON.parse($("#s-args").value || "{}"); }
          catch (e) { throw new ApiError(400, ["arguments: not valid JSON"]); }
          spec.args = args;
          if ($("#s-name").value.trim()) spec.name = $("#s-name").value.trim();
          const sql = $("#s-sql").value.trim();
          const file = $("#s-file").files[0];
          let entry = $("#s-entry").value.trim();
          if (sql) { spec.sql = sql; }
          else if (file) {
            const form = new FormData();
            form.append("file", file, file.name);
            const art = await api("POST", "/artifacts", undefined, form);
            spec.pyfiles = [art.pyfile];
            if (art.name.endsWith(".py") && !entry.includes(":")) {
              entry = `${art.name.slice(0, -3)}:${entry || "main"}`;
            }
            spec.entry = entry;
          } else if (entry) { spec.entry = entry; }
          else { throw new ApiError(400, ["choose a file, an entry or SQL"]); }
          if ($("#s-streaming").checked) spec["job-type"] = "streaming";
          const key = JSON.stringify(spec);
          if (!pendingSubmit || pendingSubmit.key !== key) pendingSubmit = {key, id: requestId()};
          const r = await api("POST", "/jobs", spec, undefined, {"X-Request-Id": pendingSubmit.id});
          pendingSubmit = null;
          location.hash = `#/job/${encodeURIComponent(r.jobid)}`;
          return `submitted ${r.jobid}`;
        }, "#submit-out");
      };
    },
    async refresh() {},
  },
};

async function act(fn, outSel) {
  try {
    const r = await fn();
    if ($(outSel)) $(outSel).textContent = typeof r === "string" ? r : "done";
    await tick();
  } catch (e) { if ($(outSel)) $(outSel).textContent = e.message; }
}

async function tick() {
  if (!current) return;
  try {
    await current.view.refresh();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    setStatus(e.status === 401 ? "token needed" : `not updated: ${e.message}`);
  }
}

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [p, qs] = hash.split("?");
  const params = new URLSearchParams(qs || "");
  let name = "cluster", arg = null;
  if (p.startsWith("/jobs")) name = "jobs";
  else if (p.startsWith("/job/")) { name = "job"; arg = decodeURIComponent(p.slice(5)); }
  else if (p.startsWith("/submit")) name = "submit";
  for (const a of document.querySelectorAll("header nav a")) a.classList.remove("active");
  const nav = $(`#nav-${name === "job" ? "jobs" : name}`);
  if (nav) nav.classList.add("active");
  const view = Object.create(views[name]);
  $("#view").innerHTML = "";
  $("#view").appendChild(document.getElementById(view.template).content.cloneNode(true));
  view.setup(params, arg);
  current = {name, view};
  tick();
}

$("#token-form").onsubmit = (ev) => {
  ev.preventDefault();
  localStorage.setItem("jm-token", $("#token-input").value.trim());
  $("#token-box").classList.add("hidden");
  tick();
};
window.addEventListener("hashchange", route);
route();
timer = setInterval(tick, REFRESH_MS);
