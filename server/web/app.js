// opdispatch dashboard. Speaks only the public HTTP API, through the
// project's JavaScript client. Chart.js (UMD) provides the global `Chart`.
import { Client, tensor, toArray, float, OpdispatchError } from "/web/opdispatch.mjs";

const od = new Client(location.origin);
const $ = (id) => document.getElementById(id);
const ChartJS = globalThis.Chart;

// ---- small helpers -----------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
  return e;
}

function fmt(x, digits = 1) {
  if (x === undefined || x === null || Number.isNaN(x)) return "–";
  if (typeof x !== "number") return String(x);
  if (x !== 0 && (Math.abs(x) >= 1e6 || Math.abs(x) < 1e-3)) return x.toExponential(2);
  return x.toFixed(digits).replace(/\.0+$/, "");
}

function bytes(n) {
  if (n === undefined || n === null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${fmt(n, i ? 1 : 0)} ${u[i]}`;
}

function errText(e) {
  if (e instanceof OpdispatchError) return `${e.status || ""} ${e.code}: ${e.message}`.trim();
  return String(e?.message ?? e);
}

function showError(node, e) {
  if (!e) { node.hidden = true; node.textContent = ""; return; }
  node.hidden = false;
  node.textContent = typeof e === "string" ? e : errText(e);
}

async function copyText(text, button) {
  let ok = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch { /* fall back below */ }
  if (!ok) {
    const ta = el("textarea", { style: "position:fixed;left:-9999px;top:0" });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    ta.remove();
  }
  if (button) {
    const old = button.dataset.label ?? button.textContent;
    button.dataset.label = old;
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = old; }, 1500);
  }
  return ok;
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button.copy");
  if (!b) return;
  ev.preventDefault();
  copyText($(b.dataset.copy).textContent, b);
});

// ---- polling that stops while the tab is hidden ------------------------------

class Poller {
  constructor(fn, ms) {
    this.fn = fn;
    this.ms = ms;
    this.on = false;
    this.timer = null;
    this.busy = false;
    Poller.all.add(this);
  }
  start(now = true) {
    this.on = true;
    if (!this.timer && !document.hidden) this._schedule(now ? 0 : this.ms);
  }
  stop() {
    this.on = false;
    this._clear();
  }
  _clear() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
  _schedule(ms) {
    this._clear();
    this.timer = setTimeout(() => this._tick(), ms);
  }
  async _tick() {
    this.timer = null;
    if (!this.on || document.hidden || this.busy) return;
    this.busy = true;
    try { await this.fn(); } catch { /* each poller shows its own errors */ }
    this.busy = false;
    if (this.on && !document.hidden && !this.timer) this._schedule(this.ms);
  }
  static pauseAll() { for (const p of Poller.all) p._clear(); }
  static resumeAll() { for (const p of Poller.all) if (p.on && !p.timer) p._schedule(0); }
}
Poller.all = new Set();

document.addEventListener("visibilitychange", () => {
  if (document.hidden) Poller.pauseAll();
  else Poller.resumeAll();
});

// ---- state shared by the views -----------------------------------------------

const KINDS = [
  { kind: "kernel", label: "kernel", letter: "K", cls: "k-kernel" },
  { kind: "default backend kernel", label: "default backend kernel (CompositeExplicitAutograd)", letter: "D", cls: "k-default" },
  { kind: "math kernel", label: "math kernel (CompositeImplicitAutograd)", letter: "M", cls: "k-math" },
  { kind: "autograd kernel", label: "autograd kernel", letter: "A", cls: "k-autograd" },
  { kind: "backend fallback", label: "backend fallback", letter: "F", cls: "k-fallback" },
  { kind: "fallthrough", label: "fallthrough", letter: "T", cls: "k-fallthrough" },
  { kind: "missing", label: "missing (no kernel)", letter: "–", cls: "k-missing" },
];
const KIND = Object.fromEntries(KINDS.map((k) => [k.kind, k]));
const kindOf = (k) => KIND[k] ?? { kind: k, label: k, letter: "?", cls: "k-missing" };
const DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"];

const state = {
  keys: null,          // GET /v1/keys
  ops: null,           // GET /v1/ops
  overloads: [],       // flat list of overloads
  fallthroughKeys: new Set(),
  schemas: new Map(),  // model -> GET /v1/ops/{op}
};

async function opDetail(model) {
  if (!state.schemas.has(model)) state.schemas.set(model, await od.op(model));
  return state.schemas.get(model);
}

// ---- tabs ---------------------------------------------------------------------

const views = {};
let currentView = null;
const tabs = [...document.querySelectorAll('[role="tab"]')];

function showView(name, { focus = false, push = true } = {}) {
  if (!views[name]) name = "tables";
  if (currentView === name) return;
  if (currentView) views[currentView].leave?.();
  currentView = name;
  for (const t of tabs) {
    const on = t.dataset.view === name;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    if (on && focus) t.focus();
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  if (push && location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  views[name].enter?.();
}

for (const t of tabs) {
  t.addEventListener("click", () => showView(t.dataset.view));
  t.addEventListener("keydown", (ev) => {
    const i = tabs.indexOf(t);
    let j = null;
    if (ev.key === "ArrowRight") j = (i + 1) % tabs.length;
    else if (ev.key === "ArrowLeft") j = (i - 1 + tabs.length) % tabs.length;
    else if (ev.key === "Home") j = 0;
    else if (ev.key === "End") j = tabs.length - 1;
    if (j !== null) {
      ev.preventDefault();
      showView(tabs[j].dataset.view, { focus: true });
    }
  });
}
window.addEventListener("hashchange", () => showView(location.hash.slice(1), { push: false }));

// ---- dispatch tables view ------------------------------------------------------

function cellKind(ov, key) {
  const p = ov.table?.[key];
  if (p) return p;
  return state.fallthroughKeys.has(key) ? "fallthrough" : "missing";
}

function buildLegend() {
  const lg = $("legend");
  lg.replaceChildren(...KINDS.map((k) => el("span", { class: "item" },
    el("span", { class: `sw ${k.cls}`, "aria-hidden": "true", text: k.letter }), k.label)),
  el("span", { class: "item" }, el("span", { class: "chip", text: "Autograd" }), "registration on an alias key"));
}

function buildFilters() {
  const ns = new Set(state.overloads.map((o) => o.name.split("::")[0]));
  $("f-ns").append(...[...ns].sort().map((n) => el("option", { value: n, text: n })));
  $("f-key").append(...state.keys.runtime_keys.map((k) => el("option", { value: k.name, text: k.name })));
  $("f-kind").append(...KINDS.map((k) => el("option", { value: k.kind, text: k.kind })));
  for (const id of ["f-name", "f-ns", "f-key", "f-kind"]) {
    $(id).addEventListener("input", renderMatrix);
    $(id).addEventListener("change", renderMatrix);
  }
}

const ALIAS = new Set();

function renderMatrix() {
  const name = $("f-name").value.trim().toLowerCase();
  const ns = $("f-ns").value;
  const key = $("f-key").value;
  const kind = $("f-kind").value;
  const keys = state.keys.runtime_keys.map((k) => k.name).filter((k) => !key || k === key);
  const head = el("tr", {},
    el("th", { class: "opcol", scope: "col", text: "operator overload" }),
    keys.map((k) => el("th", { scope: "col", title: state.keys.runtime_keys.find((x) => x.name === k)?.description, text: k })),
    el("th", { class: "aliascol", scope: "col", text: "alias-key registrations" }));
  $("matrix").tHead.replaceChildren(head);
  const rows = [];
  for (const ov of state.overloads) {
    const opns = ov.name.split("::")[0];
    if (ns && opns !== ns) continue;
    if (name && !ov.name.toLowerCase().includes(name) && !ov.model.toLowerCase().includes(name)) continue;
    if (kind && !keys.some((k) => cellKind(ov, k) === kind)) continue;
    const aliases = ov.kernels.filter((k) => ALIAS.has(k));
    rows.push(el("tr", { dataset: { op: ov.name, model: ov.model } },
      el("th", { scope: "row" }, el("button", { type: "button", class: "op-link", "aria-label": `details of ${ov.name}`, onclick: () => openDetail(ov.model), text: ov.name })),
      keys.map((k) => {
        const c = kindOf(cellKind(ov, k));
        return el("td", { class: `cell ${c.cls}`, title: `${ov.name} @ ${k}: ${c.kind}`, dataset: { key: k, kind: c.kind }, text: c.letter });
      }),
      el("td", { class: "alias" }, aliases.map((a) => el("span", { class: "chip", title: `registered on the alias key ${a}`, text: a })))));
  }
  $("matrix").tBodies[0].replaceChildren(...rows);
  $("matrix-count").textContent = `${rows.length} of ${state.overloads.length} overloads`;
}

function gridTable(table, cols, rows) {
  table.replaceChildren(
    el("thead", {}, el("tr", {}, cols.map((c) => el("th", { scope: "col", class: c.num ? "num" : undefined, text: c.label })))),
    el("tbody", {}, rows.map((r) => el("tr", r.attrs ?? {}, cols.map((c) => {
      const v = c.get(r);
      return el("td", { class: c.num ? "num" : (c.cls?.(r)) }, v instanceof Node ? v : (v ?? "–"));
    })))));
}

async function openDetail(model) {
  const box = $("detail");
  box.hidden = false;
  $("detail-title").textContent = model;
  for (const tr of $("matrix").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.model === model);
  try {
    const [d, text] = await Promise.all([opDetail(model), od.dump(model)]);
    $("detail-title").textContent = d.name;
    $("detail-schema").textContent = d.schema;
    gridTable($("detail-args"), [
      { label: "name", get: (a) => a.name },
      { label: "type", get: (a) => a.type },
      { label: "keyword-only", get: (a) => (a.kwarg_only ? "yes" : "") },
      { label: "default", get: (a) => (a.has_default ? a.default_text ?? JSON.stringify(a.default) : "") },
    ], d.arguments);
    gridTable($("detail-table"), [
      { label: "key", get: (e) => e.key },
      { label: "", get: (e) => { const c = kindOf(e.fallthrough ? "fallthrough" : e.provenance); return el("span", { class: `cell ${c.cls}`, text: c.letter }); } },
      { label: "provenance", get: (e) => (e.fallthrough ? `${e.provenance} (fallthrough)` : e.provenance) },
      { label: "kernel", get: (e) => e.kernel ?? "" },
      { label: "registered_at", get: (e) => e.registered_at ?? "" },
    ], d.table.map((e) => ({ ...e, attrs: { dataset: { key: e.key } } })));
    gridTable($("detail-regs"), [
      { label: "key", get: (r) => (ALIAS.has(r.key) ? `${r.key} [alias]` : r.key) },
      { label: "kernel", get: (r) => r.kernel + (r.fallthrough ? " (fallthrough)" : "") },
      { label: "registered_at", get: (r) => r.registered_at },
    ], d.registrations);
    $("detail-fallthrough").textContent = d.fallthrough_keys?.length ? `Fallthrough keys: ${d.fallthrough_keys.join(", ")}` : "";
    const i = text.indexOf("\n# registrations");
    $("dump-table").textContent = (i >= 0 ? text.slice(0, i) : text).trim() + "\n";
    $("dump-regs").textContent = i >= 0 ? text.slice(i).trim() + "\n" : "";
    box.scrollIntoView({ block: "nearest" });
    $("detail-close").focus({ preventScroll: true });
  } catch (e) {
    $("detail-schema").textContent = errText(e);
  }
}
$("detail-close").addEventListener("click", () => {
  const model = $("detail-title").textContent;
  $("detail").hidden = true;
  const b = [...document.querySelectorAll("#matrix .op-link")].find((x) => x.textContent === model);
  b?.focus();
});

views.tables = {};

// ---- statistics view -----------------------------------------------------------

const HISTORY_S = 300;
const stats = {
  prev: null,          // {t, byOp}
  samples: [],         // {t, rps: {op: r}, p50: {op}, p99: {op}}
  rows: [],
  sort: { col: "requests", desc: true },
  selected: null,
  chartRps: null,
  chartLat: null,
};
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];

function backendKey(o) {
  const ks = (o.keys ?? []).filter((k) => (k.kernel_calls ?? 0) > 0 && k.kernel_us);
  return ks.length ? ks[ks.length - 1] : null;
}

async function pollStats() {
  let s;
  try {
    s = await od.stats();
    showError($("global-error"), null);
  } catch (e) {
    showError($("global-error"), `statistics: ${errText(e)}`);
    return;
  }
  const t = performance.now() / 1000;
  const byOp = new Map(s.ops.map((o) => [o.op, o]));
  const prev = stats.prev;
  const dt = prev ? t - prev.t : 0;
  const reset = prev && s.since_reset_s < prev.since;
  const rows = s.ops.map((o) => {
    const p = prev && !reset ? prev.byOp.get(o.op) : null;
    const dreq = p ? o.requests - p.requests : 0;
    const derr = p ? o.errors - p.errors : 0;
    const bk = backendKey(o);
    return {
      op: o.op,
      requests: o.requests,
      errors: o.errors,
      rps: dt > 0 ? dreq / dt : 0,
      err_rate: dreq > 0 ? derr / dreq : (o.requests ? o.errors / o.requests : 0),
      p50: o.e2e_us?.p50, p99: o.e2e_us?.p99,
      k50: bk?.kernel_us.p50, k99: bk?.kernel_us.p99, kkey: bk?.key,
      raw: o,
    };
  });
  stats.rows = rows;
  stats.prev = { t, byOp, since: s.since_reset_s };
  if (prev) {
    stats.samples.push({
      t, time: new Date(),
      rps: Object.fromEntries(rows.map((r) => [r.op, r.rps])),
      p50: Object.fromEntries(rows.map((r) => [r.op, r.p50])),
      p99: Object.fromEntries(rows.map((r) => [r.op, r.p99])),
      total: rows.reduce((a, r) => a + r.rps, 0),
    });
    while (stats.samples.length && t - stats.samples[0].t > HISTORY_S) stats.samples.shift();
  }
  $("stats-info").textContent = `uptime ${fmt(s.uptime_s, 0)} s · since reset ${fmt(s.since_reset_s, 0)} s · ${rows.reduce((a, r) => a + r.requests, 0)} calls · live autograd nodes ${s.autograd?.live_nodes ?? 0} · stored tensors ${s.store?.tensors ?? 0}`;
  if (currentView === "stats") renderStats();
}

const STAT_COLS = [
  { col: "op", label: "operator", get: (r) => r.op },
  { col: "requests", label: "calls", num: true, get: (r) => r.requests },
  { col: "rps", label: "calls/s", num: true, get: (r) => fmt(r.rps, 1) },
  { col: "err_rate", label: "errors", num: true, get: (r) => `${fmt(r.err_rate * 100, 1)}%` },
  { col: "p50", label: "e2e p50 µs", num: true, get: (r) => fmt(r.p50) },
  { col: "p99", label: "e2e p99 µs", num: true, get: (r) => fmt(r.p99) },
  { col: "k50", label: "kernel p50 µs", num: true, get: (r) => fmt(r.k50) },
  { col: "k99", label: "kernel p99 µs", num: true, get: (r) => fmt(r.k99) },
  { col: "kkey", label: "kernel key", get: (r) => r.kkey ?? "–" },
];

function renderStats() {
  const { col, desc } = stats.sort;
  const rows = [...stats.rows].sort((a, b) => {
    const x = a[col] ?? -Infinity, y = b[col] ?? -Infinity;
    const c = typeof x === "string" ? String(x).localeCompare(String(y)) : x - y;
    return desc ? -c : c;
  });
  const table = $("top-ops");
  // The header is built once and updated in place, and a focused row is
  // focused again after the rebuild: the view refreshes every 1.5 s, and a
  // keyboard user (or a test) must not lose the control it is on.
  if (!table.tHead.rows.length) {
    table.tHead.append(el("tr", {}, STAT_COLS.map((c) => el("th", { scope: "col", class: c.num ? "num" : undefined },
      el("button", {
        type: "button", dataset: { col: c.col },
        onclick: () => { stats.sort = { col: c.col, desc: stats.sort.col === c.col ? !stats.sort.desc : c.col !== "op" }; renderStats(); },
      })))));
  }
  STAT_COLS.forEach((c, i) => {
    const th = table.tHead.rows[0].cells[i];
    th.setAttribute("aria-sort", c.col === col ? (desc ? "descending" : "ascending") : "none");
    th.firstChild.textContent = c.label + (c.col === col ? (desc ? " ▼" : " ▲") : "");
  });
  const focused = table.tBodies[0].contains(document.activeElement) ? document.activeElement.dataset.op : undefined;
  table.tBodies[0].replaceChildren(...rows.map((r) => {
    const tr = el("tr", {
      class: r.op === stats.selected ? "selected" : undefined, tabindex: "0", dataset: { op: r.op },
      onclick: () => selectStatOp(r.op),
      onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); selectStatOp(r.op); } },
    }, STAT_COLS.map((c) => el("td", { class: c.num ? "num" : undefined, text: c.get(r) })));
    return tr;
  }));
  if (focused !== undefined) [...table.tBodies[0].rows].find((tr) => tr.dataset.op === focused)?.focus();
  if (!rows.length) table.tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: STAT_COLS.length, class: "muted", text: "no calls yet (run one in the Playground)" })));
  renderSplit();
  renderStatCharts();
}

function selectStatOp(op) {
  stats.selected = stats.selected === op ? null : op;
  renderStats();
}

function renderSplit() {
  const r = stats.rows.find((x) => x.op === stats.selected);
  $("split-op").textContent = r ? r.op : "select an operator";
  $("lat-op").textContent = r ? r.op : "the busiest operator";
  if (!r) { $("key-split").replaceChildren(); return; }
  gridTable($("key-split"), [
    { label: "key", get: (k) => k.key },
    { label: "requests", num: true, get: (k) => k.requests },
    { label: "errors", num: true, get: (k) => k.errors },
    { label: "kernel calls", num: true, get: (k) => k.kernel_calls },
    { label: "kernel p50 µs", num: true, get: (k) => fmt(k.kernel_us?.p50) },
    { label: "kernel p99 µs", num: true, get: (k) => fmt(k.kernel_us?.p99) },
    { label: "kernel mean µs", num: true, get: (k) => fmt(k.kernel_us?.mean) },
    { label: "e2e p50 µs", num: true, get: (k) => (k.requests ? fmt(k.e2e_us?.p50) : "–") },
  ], r.raw.keys ?? []);
}

function makeLineChart(canvas, yTitle, extraScales) {
  return new ChartJS(canvas, {
    type: "line",
    data: { labels: [], datasets: [] },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
      interaction: { mode: "index", intersect: false },
      elements: { point: { radius: 0 }, line: { borderWidth: 2 } },
      scales: { x: { ticks: { maxTicksLimit: 6, autoSkip: true } }, y: { beginAtZero: true, title: { display: true, text: yTitle } }, ...(extraScales ?? {}) },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
    },
  });
}

function timeLabel(d) {
  return d.toLocaleTimeString([], { hour12: false, minute: "2-digit", second: "2-digit" });
}

function renderStatCharts() {
  if (!ChartJS) return;
  if (!stats.chartRps) stats.chartRps = makeLineChart($("chart-rps"), "calls/s");
  if (!stats.chartLat) stats.chartLat = makeLineChart($("chart-lat"), "µs");
  const labels = stats.samples.map((s) => timeLabel(s.time));
  const top = [...stats.rows].sort((a, b) => b.requests - a.requests).slice(0, 5).map((r) => r.op);
  const c1 = stats.chartRps;
  c1.data.labels = labels;
  c1.data.datasets = [
    { label: "all", data: stats.samples.map((s) => s.total), borderColor: "#555", borderDash: [4, 3], backgroundColor: "#555" },
    ...top.map((op, i) => ({ label: op.replace(/^aten::/, ""), data: stats.samples.map((s) => s.rps[op] ?? 0), borderColor: PALETTE[i], backgroundColor: PALETTE[i] })),
  ];
  c1.update("none");
  const op = stats.selected ?? top[0];
  const c2 = stats.chartLat;
  c2.data.labels = labels;
  c2.data.datasets = op ? [
    { label: "e2e p50", data: stats.samples.map((s) => s.p50[op] ?? null), borderColor: PALETTE[0], backgroundColor: PALETTE[0] },
    { label: "e2e p99", data: stats.samples.map((s) => s.p99[op] ?? null), borderColor: PALETTE[5], backgroundColor: PALETTE[5], borderDash: [6, 3] },
  ] : [];
  c2.update("none");
}

const statsPoller = new Poller(pollStats, 1500);
$("stats-reset").addEventListener("click", async () => {
  try {
    await od.resetStats();
    stats.prev = null;
    stats.samples = [];
    await pollStats();
  } catch (e) { showError($("global-error"), e); }
});
views.stats = { enter: () => { renderStats(); statsPoller.start(); } };

// ---- devices view -------------------------------------------------------------------

function card(title, pairs, extra) {
  return el("div", { class: "card" }, el("h3", { text: title }),
    el("dl", {}, pairs.filter(Boolean).map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v ?? "–" })])), extra);
}

async function pollDevices() {
  const box = $("devices");
  let d;
  try { d = await od.devices(); } catch (e) { box.replaceChildren(el("div", { class: "error", text: errText(e) })); return; }
  const cpu = d.cpu ?? {};
  const cards = [card("CPU", [
    ["model", cpu.model], ["cores", cpu.cores], ["kernel threads", cpu.kernel_threads],
    ["BLAS", cpu.blas ? `${cpu.blas.library ?? ""}${cpu.blas.core ? ", " + cpu.blas.core + " kernels" : ""} (${cpu.blas.threads ?? "?"} threads)` : "none"],
    cpu.blas?.config ? ["BLAS config", cpu.blas.config] : null,
    ["HTTP threads", cpu.http_threads], ["call workers", cpu.call_workers],
    cpu.allocator ? ["allocator in use", bytes(cpu.allocator.in_use_bytes)] : null,
    cpu.allocator ? ["allocator cached", `${bytes(cpu.allocator.cached_bytes)} of ${bytes(cpu.allocator.cache_limit)}`] : null,
  ])];
  const cuda = d.cuda ?? {};
  if (!cuda.available) {
    cards.push(el("div", { class: "card", id: "cuda-unavailable" }, el("h3", { text: "CUDA unavailable" }),
      el("p", { class: "reason", text: cuda.reason ?? "no reason given" }),
      el("p", { class: "muted small", text: cuda.compiled === false ? "built without CUDA" : "built with CUDA" })));
  }
  for (const g of cuda.devices ?? []) {
    const al = g.allocator ?? {};
    const pct = (v) => (v === undefined ? "unknown (no NVML)" : `${v} %`);
    cards.push(card(`GPU ${g.index ?? ""}: ${g.name ?? "?"}`, [
      ["memory total", bytes(g.total_memory_bytes)],
      ["free (driver)", bytes(g.free_memory_bytes)],
      ["allocator in use", bytes(al.in_use_bytes)],
      ["allocator cached", bytes(al.cached_bytes)],
      ["allocator peak", bytes(al.peak_in_use_bytes)],
      ["utilisation", pct(g.utilization_gpu_percent)],
      ["memory-bus utilisation", pct(g.utilization_memory_percent)],
      ["SMs", g.sm_count],
      ["compute capability", g.compute_capability],
      ["driver / runtime", `${g.driver_version} / ${g.runtime_version}`],
    ], el("details", {}, el("summary", { text: "raw" }), el("pre", { text: JSON.stringify(g, null, 2) }))));
  }
  box.replaceChildren(...cards);
}
const devicesPoller = new Poller(pollDevices, 5000);
$("devices-refresh").addEventListener("click", pollDevices);
views.devices = { enter: () => devicesPoller.start(), leave: () => devicesPoller.stop() };

// ---- playground ----------------------------------------------------------------------

const pg = { detail: null, hist: [] };

function fillOpSelect(select, filter = () => true) {
  select.replaceChildren(...state.overloads.filter(filter).map((o) => el("option", { value: o.model, text: o.model })));
}

function baseType(t) { return t.replace(/\?$/, ""); }
function isOptional(t) { return t.endsWith("?"); }

function defaultShape(d) {
  const n = d.name.split("::").pop().split(".")[0];
  if (["mm", "matmul", "addmm", "linear"].includes(n)) return "2,2";
  if (n === "bmm") return "2,2,2";
  return "2,2";
}

function argControl(a, d) {
  const t = baseType(a.type);
  const id = `pg-arg-${a.name}`;
  const parts = [];
  const wrap = el("div", { class: "arg", dataset: { name: a.name, type: a.type } },
    el("span", { class: "argname", text: a.name + (a.kwarg_only ? " (kw)" : "") }),
    el("span", { class: "argtype", text: a.type + (a.has_default ? ` = ${a.default_text ?? ""}` : "") }));
  if (a.has_default || isOptional(a.type)) {
    wrap.append(el("label", {}, el("input", { type: "checkbox", class: "use", checked: !a.has_default, "aria-label": `set ${a.name}` }), "set"));
  }
  if (t === "Tensor" || t === "Tensor[]") {
    if (t === "Tensor[]") parts.push(el("label", {}, "count", el("input", { class: "count", type: "number", min: "1", value: "2", size: "3" })));
    parts.push(
      el("label", {}, "shape", el("input", { class: "shape", id, value: defaultShape(d), size: "8", "aria-label": `${a.name} shape` })),
      el("label", {}, "dtype", el("select", { class: "dtype", "aria-label": `${a.name} dtype` }, DTYPES.map((x) => el("option", { value: x, text: x })))),
      el("label", {}, "data", el("select", { class: "gen", "aria-label": `${a.name} data` }, ["values", "rand", "randn", "zeros", "ones"].map((x) => el("option", { value: x, text: x })))),
      el("label", { class: "vals-l" }, "values", el("input", { class: "values", size: "18", placeholder: "1,2,3,4 (blank: 1..n)", "aria-label": `${a.name} values` })),
      el("label", {}, el("input", { type: "checkbox", class: "rg", "aria-label": `${a.name} requires_grad` }), "requires_grad"));
  } else if (t === "bool") {
    parts.push(el("input", { type: "checkbox", class: "val", id, checked: a.default === true, "aria-label": a.name }));
  } else if (t === "ScalarType") {
    parts.push(el("select", { class: "val", id, "aria-label": a.name }, DTYPES.map((x) => el("option", { value: x, text: x }))));
  } else {
    let v = "";
    if (a.has_default && a.default !== null && a.default !== undefined) v = Array.isArray(a.default) ? a.default.join(",") : String(a.default);
    else if (/^(int|SymInt)/.test(t)) v = t.includes("[") ? "1" : "1";
    else if (/^(float|Scalar)/.test(t)) v = "1";
    parts.push(el("input", { class: "val", id, value: v, size: "10", "aria-label": a.name, placeholder: t.includes("[") ? "comma-separated" : "" }));
  }
  wrap.append(...parts);
  return wrap;
}

function renderPgForm() {
  const d = pg.detail;
  $("pg-schema").textContent = d.schema;
  $("pg-args").replaceChildren(...d.arguments.map((a) => argControl(a, d)));
  // first tensor data: values, the second too; default values 1..n
  renderSnippets();
}

function parseList(s) {
  return s.split(/[,\s]+/).filter(Boolean);
}
function parseShape(s) {
  const v = parseList(s.replace(/[[\]()]/g, "")).map(Number);
  if (v.some((x) => !Number.isInteger(x) || x < 0)) throw new Error(`bad shape "${s}"`);
  return v;
}

function randn() {
  let u = 0, v = 0;
  while (u === 0) u = Math.random();
  while (v === 0) v = Math.random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function makeTensor(shape, dtype, gen, values) {
  const n = shape.reduce((a, b) => a * b, 1);
  const isInt = /int|uint/.test(dtype);
  const isBool = dtype === "bool";
  let data;
  if (gen === "values") {
    const vs = values.trim() ? parseList(values.replace(/[[\]]/g, " ")).map(Number) : Array.from({ length: n }, (_, i) => i + 1);
    if (vs.length !== n) throw new Error(`${vs.length} values for shape [${shape}] (needs ${n})`);
    data = vs;
  } else if (gen === "zeros") data = new Array(n).fill(0);
  else if (gen === "ones") data = new Array(n).fill(1);
  else if (gen === "rand") data = Array.from({ length: n }, () => (isBool ? Math.random() < 0.5 : isInt ? Math.floor(Math.random() * 10) : Math.round(Math.random() * 1e4) / 1e4));
  else data = Array.from({ length: n }, () => (isBool ? Math.random() < 0.5 : isInt ? Math.round(randn() * 3) : Math.round(randn() * 1e4) / 1e4));
  if (isBool) data = data.map((x) => (x ? 1 : 0));
  if (dtype === "int64") data = data.map((x) => BigInt(Math.trunc(x)));
  return { t: tensor(dtype, shape, data), plain: { dtype, shape, data: data.map((x) => (typeof x === "bigint" ? Number(x) : x)) } };
}

function scalarValue(t, s) {
  s = s.trim();
  if (s === "" ) throw new Error("empty value");
  if (/^(int|SymInt)(\[\d*\])?$/.test(t) && t.includes("[")) return { v: parseList(s).map((x) => parseInt(x, 10)) };
  if (/^float\[\d*\]$/.test(t)) return { v: parseList(s).map(Number), floatList: true };
  if (/^bool\[\d*\]$/.test(t)) return { v: parseList(s).map((x) => x === "true" || x === "1") };
  if (t === "int" || t === "SymInt") return { v: parseInt(s, 10) };
  if (t === "float") { const x = Number(s); return { v: float(x), json: x, isFloat: true }; }
  if (t === "Scalar") {
    if (s === "true" || s === "false") return { v: s === "true" };
    const x = Number(s);
    if (Number.isNaN(x)) throw new Error(`"${s}" is not a number`);
    if (/[.eE]/.test(s)) return { v: float(x), json: x, isFloat: true };
    return { v: x };
  }
  return { v: s };
}

// Reads the form: {args, kwargs, plainArgs, plainKwargs, py args}
function readForm() {
  const d = pg.detail;
  const args = [], kwargs = {}, jArgs = [], jKwargs = {}, pyArgs = [], pyKw = [], pyPre = [];
  let byName = false;
  for (const a of d.arguments) {
    const row = $("pg-args").querySelector(`.arg[data-name="${CSS.escape(a.name)}"]`);
    const use = row.querySelector(".use");
    const t = baseType(a.type);
    let v, jv, py;
    if (use && !use.checked) {
      if (a.has_default) { byName = true; continue; }
      v = null; jv = null; py = "None";
    } else if (t === "Tensor" || t === "Tensor[]") {
      const shape = parseShape(row.querySelector(".shape").value);
      const dtype = row.querySelector(".dtype").value;
      const gen = row.querySelector(".gen").value;
      const rg = row.querySelector(".rg").checked;
      const one = (k) => {
        const m = makeTensor(shape, dtype, gen, row.querySelector(".values").value);
        if (rg) { m.t.requires_grad = true; m.plain.requires_grad = true; }
        const name = `${a.name}${k ?? ""}`;
        const npd = dtype === "bfloat16" ? "float32" : dtype === "bool" ? "bool_" : dtype;
        pyPre.push(`${name} = np.array(${JSON.stringify(m.plain.data)}, dtype=np.${npd}).reshape(${JSON.stringify(shape)})`);
        if (rg) pyPre.push(`${name} = c.tensor(${name}, requires_grad=True)`);
        return [m, name];
      };
      if (t === "Tensor[]") {
        const n = Math.max(1, parseInt(row.querySelector(".count").value, 10) || 1);
        const ms = Array.from({ length: n }, (_, k) => one(k));
        v = ms.map((m) => m[0].t); jv = ms.map((m) => m[0].plain); py = `[${ms.map((m) => m[1]).join(", ")}]`;
      } else {
        const [m, name] = one();
        v = m.t; jv = m.plain; py = name;
      }
    } else if (t === "bool") {
      v = jv = row.querySelector(".val").checked; py = v ? "True" : "False";
    } else {
      const s = row.querySelector(".val").value;
      if (t === "ScalarType" || t === "str" || t === "Device" || t === "MemoryFormat" || t === "Layout") { v = jv = s; py = JSON.stringify(s); }
      else {
        const r = scalarValue(t, s);
        v = r.v; jv = r.json ?? r.v;
        py = Array.isArray(jv) ? `[${jv.join(", ")}]` : r.isFloat && Number.isInteger(jv) ? `${jv}.0` : String(jv);
        if (r.isFloat && Number.isInteger(jv)) jv = { __float: jv };
        if (r.floatList) jv = jv.map((x) => (Number.isInteger(x) ? { __float: x } : x));
        if (r.floatList) v = r.v.map((x) => float(x));
      }
    }
    if (a.kwarg_only || byName) { kwargs[a.name] = v; jKwargs[a.name] = jv; pyKw.push(`${a.name}=${py}`); }
    else { args.push(v); jArgs.push(jv); pyArgs.push(py); }
  }
  return { args, kwargs, jArgs, jKwargs, pyArgs, pyKw, pyPre };
}

function readOptions() {
  const o = {};
  const dev = $("pg-device").value;
  if (dev) o.device = dev;
  if ($("pg-grad").value) o.gradMode = $("pg-grad").value;
  const modes = ["trace", "profile", "validate"].filter((m) => $(`pg-mode-${m}`).checked);
  const ov = $("pg-override").value.trim();
  if (ov) {
    // "mm=mm_reference, add.Tensor=..." -> {override: {mm: "mm_reference", ...}}
    const map = {};
    for (const pair of ov.split(",").map((x) => x.trim()).filter(Boolean)) {
      const [from, to] = pair.split("=").map((x) => x.trim());
      if (!from || !to) throw new Error(`override: "${pair}" is not op=replacement`);
      map[from] = to;
    }
    modes.push({ override: map });
  }
  if (modes.length) o.modes = modes;
  if ($("pg-autocast").value) o.autocast = $("pg-autocast").value;
  if ($("pg-vmap").checked) {
    o.vmap = { in_dims: readDims($("pg-indims").value), out_dims: readDims($("pg-outdims").value) };
    if ($("pg-randomness").value) o.vmap.randomness = $("pg-randomness").value;
  }
  return o;
}

// "0", "(0, None)", "[1, null]" -> 0 or [0, null]: PyTorch's in_dims/out_dims spelling
function readDims(text) {
  const txt = text.trim();
  const dims = parseList(txt.replace(/[[\]()]/g, "")).map((x) => (x === "null" || x === "None" ? null : parseInt(x, 10)));
  if (dims.some((d) => d !== null && !Number.isInteger(d))) throw new Error(`vmap dims: "${text}" is not a number, None or a list of them`);
  return dims.length === 1 && !txt.includes(",") ? dims[0] : dims;
}

function jsonText(v) {
  // JSON with {__float: n} written as n.0
  return JSON.stringify(v).replace(/\{"__float":(-?\d+)\}/g, "$1.0");
}

function renderSnippets() {
  let f, o;
  try { f = readForm(); o = readOptions(); } catch (e) { $("pg-curl").textContent = `# ${e.message}`; $("pg-python").textContent = `# ${e.message}`; return null; }
  const body = { args: f.jArgs };
  if (Object.keys(f.jKwargs).length) body.kwargs = f.jKwargs;
  if (o.device) body.device = o.device;
  if (o.gradMode) body.grad_mode = o.gradMode;
  if (o.modes) body.modes = o.modes;
  if (o.vmap) body.vmap = o.vmap;
  if (o.autocast) body.autocast = o.autocast;
  const model = pg.detail.model;
  const bodyText = jsonText(body);
  $("pg-curl").textContent = `curl -X POST ${location.origin}/v1/ops/${model} -H 'Content-Type: application/json' \\\n  -d '${bodyText.replace(/'/g, "'\\''")}'`;
  const lines = ["import numpy as np", "from opdispatch import Client", "", `c = Client(${JSON.stringify(location.origin)})`, ...f.pyPre];
  const callArgs = [JSON.stringify(model), ...f.pyArgs, ...f.pyKw];
  if (o.device) callArgs.push(`device=${JSON.stringify(o.device)}`);
  const vmapKw = o.vmap ? [`in_dims=${pyDims(o.vmap.in_dims)}`, `out_dims=${pyDims(o.vmap.out_dims)}`,
    ...(o.vmap.randomness ? [`randomness=${JSON.stringify(o.vmap.randomness)}`] : [])] : [];
  let call = o.vmap
    ? `c.vmap(${[JSON.stringify(model), ...vmapKw].join(", ")})(${[...f.pyArgs, ...f.pyKw].join(", ")})`
    : `c.call(${callArgs.join(", ")})`;
  const ctx = [];
  if (o.gradMode === "no_grad") ctx.push("c.no_grad()");
  else if (o.gradMode) ctx.push(`c.${o.gradMode}()`);
  if (o.modes) ctx.push(`c.modes(${JSON.stringify(o.modes)})`);
  if (o.autocast) ctx.push(`c.autocast(${JSON.stringify(o.autocast)})`);
  if (ctx.length) lines.push(`with ${ctx.join(", ")}:`, `    out = ${call}`);
  else lines.push(`out = ${call}`);
  lines.push("print(out)", 'print(c.last_dispatch["path"])');
  $("pg-python").textContent = lines.join("\n") + "\n";
  return { f, o };
}
function pyDims(d) {
  if (!Array.isArray(d)) return d === null ? "None" : String(d);
  return `(${d.map((x) => (x === null ? "None" : x)).join(", ")}${d.length === 1 ? "," : ""})`;
}

function tensorStats(vals) {
  let min = Infinity, max = -Infinity, sum = 0, n = 0;
  for (const v of vals) { if (Number.isFinite(v)) { if (v < min) min = v; if (v > max) max = v; sum += v; n++; } }
  return { min, max, mean: n ? sum / n : NaN, finite: n };
}

function outputView(o, i) {
  const box = el("div", { class: "out", dataset: { index: i } });
  if (!o || typeof o !== "object" || !o.dtype || !o.shape) {
    box.append(el("pre", { text: JSON.stringify(o, (k, v) => (typeof v === "bigint" ? v.toString() : v), 2) }));
    return box;
  }
  const title = `${o.name ?? `output ${i}`}: ${o.dtype} [${o.shape.join(", ")}]${o.device ? ` on ${o.device}` : ""}${o.requires_grad ? " · requires_grad" : ""}`;
  box.append(el("h4", { text: title }));
  if (!o.data) { box.append(el("p", { class: "muted", text: "no data (a stored tensor)" })); return box; }
  const arr = Array.from(toArray(o), (x) => (typeof x === "bigint" ? Number(x) : x));
  const n = arr.length;
  const show = (x) => (o.dtype === "bool" ? String(Boolean(x)) : Number.isInteger(x) ? String(x) : fmt(x, 4));
  if (n <= 64) {
    const cols = o.shape.length >= 2 ? o.shape[o.shape.length - 1] : Math.max(1, n);
    const rowsN = cols ? Math.ceil(n / cols) : 0;
    const t = el("table", { class: "grid out-table" }, el("tbody", {}, Array.from({ length: rowsN }, (_, r) =>
      el("tr", {}, arr.slice(r * cols, r * cols + cols).map((x) => el("td", { class: "num", text: show(x) }))))));
    box.append(el("div", { class: "scroll" }, t));
  } else {
    const s = tensorStats(arr);
    box.append(el("dl", { class: "card" }, [["elements", n], ["min", fmt(s.min, 4)], ["max", fmt(s.max, 4)], ["mean", fmt(s.mean, 4)]].map(([k, v]) => [el("dt", { text: k }), el("dd", { class: `st-${k}`, text: v })])));
    if (ChartJS && s.finite) {
      const bins = 30;
      const lo = s.min, hi = s.max === s.min ? s.min + 1 : s.max;
      const counts = new Array(bins).fill(0);
      for (const v of arr) if (Number.isFinite(v)) counts[Math.min(bins - 1, Math.floor((v - lo) / (hi - lo) * bins))]++;
      const canvas = el("canvas", { "aria-label": "histogram of the values", role: "img" });
      box.append(el("div", { class: "hist" }, canvas));
      pg.hist.push(new ChartJS(canvas, {
        type: "bar",
        data: { labels: counts.map((_, k) => fmt(lo + (k + 0.5) * (hi - lo) / bins, 3)), datasets: [{ label: "count", data: counts, backgroundColor: "#0072B2" }] },
        options: { animation: false, responsive: true, maintainAspectRatio: false, plugins: { legend: { display: false } }, scales: { x: { ticks: { maxTicksLimit: 8 } } } },
      }));
    }
  }
  return box;
}

function renderPath(dispatch) {
  const steps = dispatch?.steps ?? [];
  $("pg-keyset").textContent = dispatch ? `${dispatch.keyset_text ?? ""} · device ${dispatch.device ?? "?"} · path: ${dispatch.path ?? ""}` : "";
  const items = [];
  steps.forEach((s, i) => {
    if (i) items.push(el("li", { class: "arrow", "aria-hidden": "true", text: "→" }));
    const c = kindOf(s.provenance);
    items.push(el("li", { class: "step-li", dataset: { key: s.key, kernel: s.kernel, provenance: s.provenance } },
      el("div", { class: "step", title: s.registered_at ?? "", style: `margin-top:${(s.depth ?? 0) * 0.4}rem` },
        el("div", {}, el("span", { class: "key", text: s.key }), " ", el("span", { class: `prov ${c.cls}`, text: `${c.letter} ${s.provenance}` })),
        el("div", { class: "kernel", text: `${s.op && s.op !== dispatch.steps[0].op ? s.op + " · " : ""}${s.kernel}` }),
        el("div", { class: "muted small", text: `${fmt(s.us, 1)} µs · depth ${s.depth ?? 0}${s.status && s.status !== "ok" ? " · " + s.status : ""}` }))));
  });
  if (dispatch?.dropped_steps) items.push(el("li", { class: "muted", text: `… ${dispatch.dropped_steps} more steps` }));
  $("pg-path").replaceChildren(...items);
  const tm = dispatch?.timing_us;
  $("pg-timing").textContent = tm ? `server time (µs): ${Object.entries(tm).map(([k, v]) => `${k} ${fmt(v, 1)}`).join(" · ")}` : "";
}

async function runPlayground(ev) {
  ev?.preventDefault();
  const snip = renderSnippets();
  showError($("pg-error"), null);
  if (!snip) { showError($("pg-error"), $("pg-curl").textContent.replace(/^# /, "")); return; }
  const { f, o } = snip;
  $("pg-status").textContent = "running…";
  $("pg-run").disabled = true;
  const t0 = performance.now();
  try {
    const res = await od.call(pg.detail.model, f.args, Object.keys(f.kwargs).length ? f.kwargs : undefined, { ...o, full: true, binary: false });
    for (const c of pg.hist) c.destroy();
    pg.hist = [];
    $("pg-result").hidden = false;
    $("pg-outputs").replaceChildren(el("p", { class: "muted", text: res.op }), ...res.outputs.map((x, i) => outputView(x, i)));
    renderPath(res.dispatch);
    $("pg-modes-box").hidden = !res.modes;
    $("pg-modes").textContent = res.modes ? JSON.stringify(res.modes, null, 2) : "";
    $("pg-status").textContent = `done in ${fmt(performance.now() - t0, 1)} ms`;
  } catch (e) {
    $("pg-status").textContent = "";
    showError($("pg-error"), e);
  } finally {
    $("pg-run").disabled = false;
  }
}

async function selectPgOp(model) {
  try {
    pg.detail = await opDetail(model);
    renderPgForm();
  } catch (e) { showError($("pg-error"), e); }
}

$("pg-op").addEventListener("change", () => selectPgOp($("pg-op").value));
$("pg-form").addEventListener("submit", runPlayground);
$("pg-form").addEventListener("input", (ev) => { if (ev.target.id !== "pg-op" && pg.detail) renderSnippets(); });
$("pg-form").addEventListener("change", (ev) => { if (ev.target.id !== "pg-op" && pg.detail) renderSnippets(); });
views.playground = { enter: () => { if (!pg.detail && $("pg-op").value) selectPgOp($("pg-op").value); } };

// ---- load panel ---------------------------------------------------------------------------

const load = { chart: null, poller: null, forbidden: false };

function loadChart() {
  if (!ChartJS) return null;
  if (!load.chart) {
    load.chart = new ChartJS($("chart-load"), {
      type: "line",
      data: { labels: [], datasets: [
        { label: "calls/s", data: [], yAxisID: "y", borderColor: "#0072B2", backgroundColor: "#0072B2" },
        { label: "p50 µs", data: [], yAxisID: "y1", borderColor: "#E69F00", backgroundColor: "#E69F00" },
        { label: "p99 µs", data: [], yAxisID: "y1", borderColor: "#D55E00", backgroundColor: "#D55E00", borderDash: [6, 3] },
      ] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        elements: { point: { radius: 0 }, line: { borderWidth: 2 } },
        scales: {
          x: { title: { display: true, text: "s" }, ticks: { maxTicksLimit: 10 } },
          y: { beginAtZero: true, position: "left", title: { display: true, text: "calls/s" } },
          y1: { beginAtZero: true, position: "right", title: { display: true, text: "µs" }, grid: { drawOnChartArea: false } },
        },
        plugins: { legend: { position: "bottom" } },
      },
    });
  }
  return load.chart;
}

function renderLoad(s) {
  const running = s.state === "running";
  $("load-state").textContent = `state: ${s.state}${s.op ? ` · ${s.op}` : ""}${s.message ? ` · ${s.message}` : ""}`;
  $("load-state").dataset.state = s.state;
  $("load-stop").disabled = !running;
  $("load-start").disabled = running || load.forbidden;
  const lat = s.latency_us ?? {};
  if (s.state !== "idle") {
    $("load-summary").replaceChildren(card("Load", [
      ["state", s.state], ["operator", s.op], ["elapsed", `${fmt(s.elapsed_s, 1)} s`],
      ["requests", s.requests], ["errors", s.errors], ["calls/s", fmt(s.rps, 1)],
      ["p50", `${fmt(lat.p50)} µs`], ["p90", `${fmt(lat.p90)} µs`], ["p99", `${fmt(lat.p99)} µs`], ["max", `${fmt(lat.max)} µs`],
    ]));
  }
  const c = loadChart();
  if (c && Array.isArray(s.series)) {
    c.data.labels = s.series.map((p) => fmt(p.t, 1));
    c.data.datasets[0].data = s.series.map((p) => p.rps);
    c.data.datasets[1].data = s.series.map((p) => p.p50_us);
    c.data.datasets[2].data = s.series.map((p) => p.p99_us);
    c.update("none");
  }
  if (running) load.poller.start(false);
  else load.poller.stop();
}

function loadFailed(e) {
  if (e instanceof OpdispatchError && e.status === 403) {
    load.forbidden = true;
    showError($("load-forbidden"), `Load is disabled on this server (403 ${e.code}): ${e.message}\nStart opdispatchd with --enable-bench to use this panel.`);
    $("load-start").disabled = true;
    $("load-stop").disabled = true;
    load.poller.stop();
    return;
  }
  if (e instanceof OpdispatchError && e.status === 404) {
    showError($("load-error"), `This server has no load endpoint (404): ${e.message}`);
    load.poller.stop();
    return;
  }
  showError($("load-error"), e);
}

async function pollLoad() {
  try {
    const s = await od.getJSON("/v1/load");
    renderLoad(s);
  } catch (e) { loadFailed(e); }
}
load.poller = new Poller(pollLoad, 1000);

$("load-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showError($("load-error"), null);
  let body;
  try {
    const model = $("load-op").value;
    const d = await opDetail(model);
    const shape = parseShape($("load-shape").value);
    const dtype = $("load-dtype").value;
    const gen = $("load-gen").value;
    const kwargs = JSON.parse($("load-kwargs").value || "{}");
    const args = [];
    for (const a of d.arguments) {
      if (a.kwarg_only || a.has_default || a.name in kwargs) continue;
      const t = baseType(a.type);
      if (t === "Tensor") args.push({ generate: gen, shape, dtype });
      else if (t === "Tensor[]") args.push([{ generate: gen, shape, dtype }, { generate: gen, shape, dtype }]);
      else throw new Error(`argument '${a.name}' (${a.type}) needs a value: give it in Extra kwargs`);
    }
    const amount = Number($("load-amount").value);
    const conc = Math.min(8, Math.max(1, parseInt($("load-conc").value, 10) || 1));
    body = { op: model, args, device: $("load-device").value, concurrency: conc };
    if (Object.keys(kwargs).length) body.kwargs = kwargs;
    if ($("load-bound").value === "count") body.count = Math.max(1, Math.round(amount));
    else body.duration_s = Math.min(120, Math.max(0.1, amount));
  } catch (e) { showError($("load-error"), e); return; }
  try {
    await od.request("POST", "/v1/load", { body: JSON.stringify(body) });
    const c = loadChart();
    if (c) { c.data.labels = []; for (const ds of c.data.datasets) ds.data = []; c.update("none"); }
    await pollLoad();
    load.poller.start(false);
  } catch (e) {
    if (e instanceof OpdispatchError && e.status === 503) showError($("load-error"), `Another load is running (503 ${e.code}): ${e.message}`);
    else loadFailed(e);
  }
});

$("load-stop").addEventListener("click", async () => {
  try {
    const r = await od.request("DELETE", "/v1/load");
    load.poller.stop();
    if (r.header) renderLoad(r.header);
  } catch (e) { loadFailed(e); }
});

views.load = {
  enter: () => { pollLoad(); },
  leave: () => { /* a running load keeps being watched until it ends */ },
};

// ---- start ----------------------------------------------------------------------------------

async function init() {
  try {
    const [keys, ops, index] = await Promise.all([od.keys(), od.ops(), od.index().catch(() => null)]);
    state.keys = keys;
    state.ops = ops;
    for (const a of keys.alias_keys ?? []) ALIAS.add(a.name);
    state.fallthroughKeys = new Set(keys.runtime_keys.filter((k) => k.backend_fallback?.fallthrough).map((k) => k.name));
    state.overloads = ops.operators.flatMap((o) => o.overloads);
    if (index) $("server-info").textContent = `${index.name ?? "opdispatchd"} ${index.version ?? ""} · ${location.host}`;
  } catch (e) {
    showError($("global-error"), `Cannot reach the server: ${errText(e)}`);
    return;
  }
  if (!ChartJS) showError($("global-error"), "Chart.js did not load (/web/vendor/chart.js): charts are off.");
  buildLegend();
  buildFilters();
  renderMatrix();
  fillOpSelect($("pg-op"));
  const add = state.overloads.find((o) => o.model === "add.Tensor");
  if (add) $("pg-op").value = add.model;
  fillOpSelect($("load-op"), (o) => o.arguments === undefined || true);
  const mm = state.overloads.find((o) => o.model === "mm") ?? add;
  if (mm) $("load-op").value = mm.model;
  $("load-dtype").replaceChildren(...DTYPES.map((x) => el("option", { value: x, text: x })));
  statsPoller.start();
  document.body.dataset.ready = "1";
  showView(location.hash.slice(1) || "tables", { push: false });
  if (currentView !== "playground") selectPgOp($("pg-op").value);
}

init();
