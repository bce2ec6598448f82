// evoduet view: the page of one or more run directories (docs/view.md). Plain JavaScript and
// SVG, no library and no network beyond this server's own JSON endpoints.
"use strict";

const state = { runs: [], run: 0, tab: null, versions: {}, loaded: {}, selected: null,
  tree: null, view: null };
const COLORS = ["#2f6fdf", "#e0631b", "#2a9d4b", "#a33fc2", "#c23f5a", "#138a8a", "#7d6b12",
  "#4a4a4a"];

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;" }[c]));
}
function fmt(v, d = 4) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return esc(v);
  return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2)
    : String(+v.toFixed(d));
}
async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
}
const api = (part) => `/api/runs/${state.run}/${part}`;

// ---------------------------------------------------------------------------------------
// runs, tabs, polling
// ---------------------------------------------------------------------------------------
async function poll() {
  let data;
  try { data = await getJSON("/api/runs"); } catch (e) {
    document.getElementById("live").textContent = "server gone"; return;
  }
  state.runs = data.runs;
  const sel = document.getElementById("run-select");
  if (sel.options.length !== state.runs.length) {
    sel.innerHTML = state.runs.map(r => `<option value="${r.id}">${esc(r.label)}</option>`).join("");
    sel.value = String(state.run);
  }
  sel.style.display = state.runs.length > 1 ? "" : "none";
  document.getElementById("compare-tab").style.display = state.runs.length > 1 ? "" : "none";
  if (state.tab === null) showTab(location.hash.slice(1) || (state.runs.length > 1 ? "compare" : "tree"));
  const run = state.runs[state.run];
  document.getElementById("run-info").textContent =
    `${run.task ?? "?"} · ${run.iterations}${run.iterations_planned ? "/" + run.iterations_planned : ""} iterations · best ${fmt(run.best_score)}` +
    (run.ndg !== null && run.ndg !== undefined ? ` · NDG ${fmt(run.ndg, 1)}%` : "");
  document.getElementById("live").textContent = run.finished ? "finished" : "● live";
  document.getElementById("notices").innerHTML =
    run.notices.map(n => `<div class="notice">${esc(run.label)}: ${esc(n)}</div>`).join("");
  const version = state.runs.map(r => r.version).join("|");
  if (state.versions[state.tab] !== version) {
    state.versions[state.tab] = version;
    await load(state.tab);
  }
}

function showTab(tab) {
  if (!["tree", "knowledge", "curves", "compare"].includes(tab)) tab = "tree";
  state.tab = tab;
  history.replaceState(null, "", "#" + tab);
  document.querySelectorAll(".tab").forEach(b => b.classList.toggle("active", b.dataset.tab === tab));
  document.querySelectorAll(".pane").forEach(p => p.classList.toggle("active", p.id === "tab-" + tab));
  const version = state.runs.map(r => r.version).join("|");
  if (state.versions[tab] !== version) { state.versions[tab] = version; load(tab); }
}

async function load(tab) {
  if (tab === "tree") await loadTree();
  else if (tab === "knowledge") await loadTimeline();
  else if (tab === "curves") await loadCurves();
  else if (tab === "compare") await loadCompare();
}

// ---------------------------------------------------------------------------------------
// the evolution tree
// ---------------------------------------------------------------------------------------
function scoreColor(t) {  // 0..1 → a blue-to-yellow ramp (viridis-like)
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  t = Math.max(0, Math.min(1, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function layoutTree(programs) {
  const byId = new Map(programs.map(p => [p.id, p]));
  const kids = new Map();
  const roots = [];
  for (const p of programs) {
    if (p.parent && byId.has(p.parent)) {
      if (!kids.has(p.parent)) kids.set(p.parent, []);
      kids.get(p.parent).push(p);
    } else roots.push(p);
  }
  const pos = new Map();
  let row = 0;
  // leaves get one row each (in iteration order); a parent sits at its first child's row
  const stack = roots.slice().reverse().map(p => [p, false]);
  while (stack.length) {
    const [p, done] = stack.pop();
    const ch = kids.get(p.id) || [];
    if (!ch.length) { pos.set(p.id, row++); continue; }
    if (done) { pos.set(p.id, pos.get(ch[0].id)); continue; }
    stack.push([p, true]);
    for (let i = ch.length - 1; i >= 0; i--) stack.push([ch[i], false]);
  }
  return { pos, rows: Math.max(row, 1), byId };
}

async function loadTree() {
  const data = await getJSON(api("programs"));
  state.tree = data;
  drawTree();
  if (!window.__firstTreeRender) {
    window.__firstTreeRender = performance.now();
    document.body.dataset.treeRendered = String(data.programs.length);
  }
  // the open program's panel is fetched again only when the program changed (e.g. it was
  // evaluated): a redraw must not close the code or prompt the reader opened
  const sel = state.selected && data.programs.find(p => p.id === state.selected);
  if (sel && signature(sel) !== state.selectedSig) selectProgram(state.selected, false);
}

function signature(p) { return `${p.status}|${p.score}|${p.error}`; }

function drawTree() {
  const { programs, best_lineage: lineage } = state.tree;
  const svg = document.getElementById("tree");
  const { pos, rows, byId } = layoutTree(programs);
  const maxIt = Math.max(1, ...programs.map(p => p.iteration));
  const scores = programs.filter(p => p.valid && p.score !== null).map(p => p.score);
  const lo = scores.length ? Math.min(...scores) : 0, hi = Math.max(...scores, lo + 1e-9);
  const W = Math.max(600, maxIt * 24), H = Math.max(300, rows * 12);
  const x = it => 30 + (it / maxIt) * (W - 60), y = r => 20 + r * ((H - 40) / Math.max(rows - 1, 1));
  const onBest = new Set(lineage);
  const r = Math.max(2.5, Math.min(6, (H - 40) / rows / 2.2));
  const edges = [], nodes = [];
  for (const p of programs) {
    const px = x(p.iteration), py = y(pos.get(p.id));
    if (p.parent && byId.has(p.parent)) {
      const q = byId.get(p.parent), qx = x(q.iteration), qy = y(pos.get(q.id));
      const best = onBest.has(p.id) && onBest.has(q.id);
      edges.push(`<path class="edge${best ? " best" : ""}" stroke-width="${best ? 3 : 1}" d="M${qx},${qy}V${py}H${px}"/>`);
    }
    const fill = p.valid && p.score !== null ? scoreColor((p.score - lo) / (hi - lo)) : "";
    const cls = `node ${esc(p.status)}${onBest.has(p.id) ? " best" : ""}${p.id === state.selected ? " selected" : ""}`;
    const title = `${p.id} · iteration ${p.iteration}${p.island !== null && p.island !== undefined ? " · island " + p.island : ""} · score ${fmt(p.score)} · ${p.status}${p.gate ? " · gate " + p.gate : ""}`;
    nodes.push(`<circle class="${cls}" data-id="${esc(p.id)}" cx="${px}" cy="${py}" r="${onBest.has(p.id) ? r * 1.4 : r}"` +
      `${fill ? ` fill="${fill}"` : ""} stroke-width="${onBest.has(p.id) ? 2.5 : 1}"><title>${esc(title)}</title></circle>`);
  }
  const axis = [];
  const step = Math.max(1, Math.ceil(maxIt / 12));
  for (let it = 0; it <= maxIt; it += step) {
    axis.push(`<text x="${x(it)}" y="${H - 4}" text-anchor="middle" font-size="10" fill="#7a8599">${it}</text>`);
  }
  // a new iteration widens the drawing: fit it again, unless the reader zoomed or panned
  if (!state.view || (!state.view.moved && (state.view.W !== W || state.view.H !== H))) {
    state.view = { W, H, x: 0, y: 0, w: W, h: H, moved: false };
  }
  setViewBox();
  svg.innerHTML = `<g>${edges.join("")}</g><g>${axis.join("")}</g><g>${nodes.join("")}</g>`;
  document.getElementById("tree-legend").innerHTML =
    `${programs.length} programs · <span>colour: score (${fmt(lo)} → ${fmt(hi)})</span>` +
    `<span style="color:#e0a100">━ best lineage</span><span style="color:#d64545">○ invalid/failed</span>` +
    `<span style="color:#8a93a3">● duplicate</span><span>x: iteration</span>`;
}

function setViewBox() {
  const v = state.view;
  document.getElementById("tree").setAttribute("viewBox", `${v.x} ${v.y} ${v.w} ${v.h}`);
}

function initTreeEvents() {
  const svg = document.getElementById("tree");
  svg.addEventListener("click", e => {
    const id = e.target.dataset && e.target.dataset.id;
    if (id && !svg.dataset.dragged) selectProgram(id, true);
  });
  svg.addEventListener("wheel", e => {
    if (!state.view) return;
    e.preventDefault();
    const v = state.view, rect = svg.getBoundingClientRect();
    const k = e.deltaY > 0 ? 1.2 : 1 / 1.2;
    const fx = (e.clientX - rect.left) / rect.width, fy = (e.clientY - rect.top) / rect.height;
    const nw = v.w * k, nh = v.h * k;
    v.x += (v.w - nw) * fx; v.y += (v.h - nh) * fy; v.w = nw; v.h = nh; v.moved = true;
    setViewBox();
  }, { passive: false });
  svg.addEventListener("dblclick", () => { state.view = null; if (state.tree) drawTree(); });
  let drag = null;
  svg.addEventListener("mousedown", e => { drag = { x: e.clientX, y: e.clientY, moved: false }; delete svg.dataset.dragged; });
  window.addEventListener("mousemove", e => {
    if (!drag || !state.view) return;
    const rect = svg.getBoundingClientRect(), v = state.view;
    const dx = (e.clientX - drag.x) * v.w / rect.width, dy = (e.clientY - drag.y) * v.h / rect.height;
    if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3) { drag.moved = true; svg.dataset.dragged = "1"; }
    if (drag.moved) v.moved = true;
    v.x -= dx; v.y -= dy; drag.x = e.clientX; drag.y = e.clientY; setViewBox();
  });
  window.addEventListener("mouseup", () => { drag = null; setTimeout(() => delete svg.dataset.dragged, 0); });
}

function diffHtml(diff) {
  return diff.split("\n").map(l => {
    const cls = l.startsWith("+++") || l.startsWith("---") ? "hunk" : l.startsWith("+") ? "add"
      : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "";
    return cls ? `<span class="${cls}">${esc(l)}</span>` : esc(l) + "\n";
  }).join("");
}

async function selectProgram(id, scroll) {
  state.selected = id;
  const row = state.tree && state.tree.programs.find(q => q.id === id);
  state.selectedSig = row ? signature(row) : null;
  document.querySelectorAll("#tree .node.selected").forEach(n => n.classList.remove("selected"));
  const node = document.querySelector(`#tree .node[data-id="${CSS.escape(id)}"]`);
  if (node) node.classList.add("selected");
  let p;
  try { p = await getJSON(api("programs/" + encodeURIComponent(id))); } catch (e) { return; }
  const metrics = Object.entries(p.metrics || {}).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${fmt(v, 6)}</td></tr>`).join("");
  const artifacts = Object.entries(p.artifacts || {}).map(([k, v]) => `<h4>${esc(k)}</h4><pre class="wrap">${esc(v)}</pre>`).join("");
  const prompts = (p.prompts || []).map((c, i) =>
    `<details class="prompt"><summary>${i ? "resample" : "call"} ${c.attempt ?? i}: prompt (${c.messages.length} messages) and reply</summary>` +
    c.messages.map(m => `<h4>${esc(m.role)}</h4><pre class="wrap">${esc(m.content)}</pre>`).join("") +
    `<h4>reply</h4><pre class="wrap">${esc(c.reply ?? ("(no reply) " + (c.error || "")))}</pre></details>`).join("");
  const delta = p.score !== null && p.parent_score !== null ? p.score - p.parent_score : null;
  document.getElementById("detail").innerHTML = `
    <h2 id="detail-id">${esc(p.id)}</h2>
    <p><span class="badge">${esc(p.status)}</span>${p.gate ? `<span class="badge ${esc(p.gate)}">gate: ${esc(p.gate)}</span>` : ""}
      iteration ${p.iteration} · generation ${p.generation} · ${esc(p.kind)} ·
      parent ${p.parent_id ? `<a href="#" data-goto="${esc(p.parent_id)}">${esc(p.parent_id)}</a>` : "–"}<br>
      score <b>${fmt(p.score, 6)}</b>${delta !== null ? ` (Δ ${delta >= 0 ? "+" : ""}${fmt(delta, 6)} vs parent)` : ""}</p>
    ${p.error ? `<h3>error</h3><pre class="wrap" id="detail-error">${esc(p.error)}</pre>` : ""}
    ${metrics ? `<h3>metrics</h3><table>${metrics}</table>` : ""}
    <h3>diff to parent</h3>
    ${p.diff === null ? "<p class='hint'>no parent</p>" : p.diff ? `<pre class="diff" id="diff">${diffHtml(p.diff)}</pre>` : "<p class='hint' id='diff'>same code as its parent</p>"}
    <details><summary>code</summary><pre id="code">${esc(p.code ?? "(no code)")}</pre></details>
    ${artifacts ? `<h3>artifacts</h3>${artifacts}` : ""}
    <h3>prompt and reply</h3>${prompts || "<p class='hint'>no prompt logged (the initial program, or a run without prompts.jsonl)</p>"}`;
  document.querySelectorAll("#detail [data-goto]").forEach(a => a.addEventListener("click", e => {
    e.preventDefault(); selectProgram(a.dataset.goto, true);
  }));
  if (scroll) document.getElementById("detail").scrollTop = 0;
}

// ---------------------------------------------------------------------------------------
// the knowledge timeline
// ---------------------------------------------------------------------------------------
async function loadTimeline() {
  const data = await getJSON(api("timeline"));
  const open = new Set([...document.querySelectorAll("#timeline details.iter[open]")].map(d => d.dataset.it));
  const cards = data.iterations.slice().reverse().map(it => {
    const ks = it.knowledge_state ? Object.entries(it.knowledge_state).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("") : "";
    const rounds = it.rounds.map(r => `<h4>round ${r.round + 1}: ${r.queries.map(q => `“${esc(q)}”`).join(", ")}</h4>
      <table><tr><th>document</th><th>predicted score</th><th></th></tr>${r.documents.map(d => `<tr><td>${esc(d.title || d.doc_id)}<br><small>${esc(d.url)}</small></td>
      <td>${fmt(d.predicted_score)}</td><td>${r.retained.includes(d.doc_id) ? '<span class="badge kept">retained</span>' : ""}${d.repeated ? '<span class="badge repeated">repeated URL</span>' : ""}</td></tr>`).join("")}</table>`).join("");
    const searches = !it.rounds.length && it.searches.length ? it.searches.map(s => `<div>“${esc(s.query)}” → ${s.results ?? 0} results${s.repeated_urls.length ? ` <span class="badge repeated">${s.repeated_urls.length} repeated URL(s)</span>` : ""}</div>`).join("") : "";
    const evidence = it.evidence.map(d => `<li><b>${esc(d.title || d.doc_id)}</b> <small>${esc(d.url || "")}</small>${d.first_seen_iteration !== undefined && d.first_seen_iteration < it.iteration ? ' <span class="badge repeated">seen before</span>' : ""}${d.excerpt ? `<pre class="wrap">${esc(d.excerpt)}</pre>` : ""}</li>`).join("");
    const impacts = it.impacts.map(m => `<span class="badge ${esc(m.outcome)}">Δ ${m.delta === null ? "–" : (m.delta >= 0 ? "+" : "") + fmt(m.delta)} ${esc(m.outcome)}</span>`).join("");
    const cands = it.candidates.map(c => `<span class="badge ${c.valid ? "" : "invalid"}">${esc(c.id)} ${fmt(c.score)}</span>`).join("");
    return `<details class="iter" data-it="${it.iteration}"${open.has(String(it.iteration)) ? " open" : ""}>
      <summary>iteration ${it.iteration} · <span class="badge ${esc(it.gate || "")}">${esc(it.gate || "no gate")}</span>
      ${impacts} ${cands} ${it.fallbacks.length ? `<span class="badge invalid">${esc(it.fallbacks.join(", "))}</span>` : ""}</summary>
      ${it.reasoning ? `<p>${esc(it.reasoning)}</p>` : ""}
      ${ks ? `<table class="ks">${ks}</table>` : ""}
      ${rounds ? `<h3>inner loop</h3>${rounds}` : ""}${searches}
      ${evidence ? `<h3>evidence the candidates saw</h3><ul>${evidence}</ul>` : ""}
    </details>`;
  });
  document.getElementById("timeline").innerHTML = cards.join("") || "<p class='hint'>no iteration yet</p>";
}

// ---------------------------------------------------------------------------------------
// charts (SVG)
// ---------------------------------------------------------------------------------------
function chart(title, series, { w = 420, h = 250, xl = "iteration", yl = "", step = false, scatter = false, diagonal = false } = {}) {
  const pts = series.flatMap(s => s.points).filter(p => p[0] !== null && p[1] !== null);
  if (!pts.length) return `<div class="chart"><h3>${esc(title)}</h3><p class="hint">no data yet</p></div>`;
  let [x0, x1] = [Math.min(...pts.map(p => p[0])), Math.max(...pts.map(p => p[0]))];
  let [y0, y1] = [Math.min(...pts.map(p => p[1])), Math.max(...pts.map(p => p[1]))];
  if (diagonal) { x0 = y0 = Math.min(x0, y0); x1 = y1 = Math.max(x1, y1); }
  if (x1 === x0) x1 = x0 + 1; if (y1 === y0) { y1 = y0 + Math.abs(y0 || 1) * 0.1; }
  const L = 58, R = 10, T = 8, B = 30;
  const X = v => L + (v - x0) / (x1 - x0) * (w - L - R), Y = v => h - B - (v - y0) / (y1 - y0) * (h - T - B);
  const g = [];
  for (let i = 0; i <= 4; i++) {
    const yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
    g.push(`<line class="grid" x1="${L}" x2="${w - R}" y1="${Y(yv)}" y2="${Y(yv)}"/><text x="${L - 4}" y="${Y(yv) + 3}" text-anchor="end">${fmt(yv, 3)}</text>`);
    g.push(`<text x="${X(xv)}" y="${h - B + 13}" text-anchor="middle">${fmt(xv, 2)}</text>`);
  }
  g.push(`<line class="axis" x1="${L}" x2="${L}" y1="${T}" y2="${h - B}"/><line class="axis" x1="${L}" x2="${w - R}" y1="${h - B}" y2="${h - B}"/>`);
  g.push(`<text x="${(L + w - R) / 2}" y="${h - 3}" text-anchor="middle">${esc(xl)}</text><text x="10" y="${(T + h - B) / 2}" transform="rotate(-90 10 ${(T + h - B) / 2})" text-anchor="middle">${esc(yl)}</text>`);
  if (diagonal) g.push(`<line x1="${X(x0)}" y1="${Y(y0)}" x2="${X(x1)}" y2="${Y(y1)}" stroke="#bbb" stroke-dasharray="4 3"/>`);
  series.forEach((s, i) => {
    const c = s.color || COLORS[i % COLORS.length];
    const p = s.points.filter(q => q[0] !== null && q[1] !== null);
    if (scatter) g.push(p.map(q => `<circle cx="${X(q[0])}" cy="${Y(q[1])}" r="3.5" fill="${c}" fill-opacity=".75"><title>${fmt(q[0])}, ${fmt(q[1])}</title></circle>`).join(""));
    else {
      const d = p.map((q, k) => (k ? (step ? `H${X(q[0])}V${Y(q[1])}` : `L${X(q[0])},${Y(q[1])}`) : `M${X(q[0])},${Y(q[1])}`)).join("");
      g.push(`<path d="${d}" fill="none" stroke="${c}" stroke-width="2" class="series" data-label="${esc(s.label || "")}"/>`);
    }
  });
  const legend = series.length > 1 ? `<div class="legend">${series.map((s, i) => `<span style="color:${s.color || COLORS[i % COLORS.length]}">━ ${esc(s.label)}</span>`).join("")}</div>` : "";
  return `<div class="chart"><h3>${esc(title)}</h3><svg width="${w}" height="${h}">${g.join("")}</svg>${legend}</div>`;
}

function bars(title, rows, key, unit = "") {
  const data = rows.filter(r => r[key]).map(r => ({ ...r, node: r.inclusive ? r.node + " (incl. inner)" : r.node }));
  if (!data.length) return `<div class="chart"><h3>${esc(title)}</h3><p class="hint">none${key === "usd" ? " (the model is not priced)" : ""}</p></div>`;
  const w = 420, bh = 18, h = data.length * (bh + 4) + 10, L = 170, max = Math.max(...data.map(r => r[key]), 1e-12);
  const g = data.map((r, i) => `<text x="${L - 4}" y="${i * (bh + 4) + 17}" text-anchor="end">${esc(r.node)}</text>` +
    `<rect x="${L}" y="${i * (bh + 4) + 5}" height="${bh}" width="${(w - L - 70) * r[key] / max}" fill="#2f6fdf"/>` +
    `<text x="${L + (w - L - 70) * r[key] / max + 4}" y="${i * (bh + 4) + 17}">${fmt(r[key], 4)}${unit}</text>`).join("");
  return `<div class="chart"><h3>${esc(title)}</h3><svg width="${w}" height="${h}">${g}</svg></div>`;
}

async function loadCurves() {
  const c = await getJSON(api("curves"));
  const tokens = c.llm.map(r => ({ ...r, tokens: r.input_tokens + r.output_tokens }));
  document.getElementById("curves").innerHTML = [
    chart("Best score so far", [{ points: c.best }], { yl: "best score", step: true }),
    chart("NDG of the best program (%)", [{ points: c.ndg }], { yl: "NDG %", step: true }),
    chart("Predicted vs realised child score", [{ points: c.predictions.map(p => [p.predicted, p.realised]) }], { xl: "predicted", yl: "realised", scatter: true, diagonal: true }),
    bars("LLM calls per node", c.llm, "calls"),
    bars("LLM tokens per node (input + output)", tokens, "tokens"),
    bars(`LLM cost per node (USD${c.price_source ? ", " + c.price_source : ""})`, c.llm, "usd"),
  ].join("");
}

async function loadCompare() {
  const data = await getJSON("/api/compare");
  const cols = [["run", "run"], ["task", "task"], ["gate", "gate"], ["iterations", "iterations"], ["best_score", "best score"],
    ["metric_value", "metric value"], ["ndg", "NDG (%)"], ["improvements", "improvements"], ["llm_calls", "LLM calls"],
    ["tokens", "tokens"], ["wall_s", "wall (s)"]];
  const table = `<table id="compare-table"><tr>${cols.map(c => `<th>${c[1]}</th>`).join("")}</tr>` +
    data.runs.map((r, i) => `<tr>${cols.map(([k]) => `<td${k === "run" ? ` style="color:${COLORS[i % COLORS.length]}"` : ""}>${fmt(r.row[k])}</td>`).join("")}</tr>`).join("") + "</table>";
  document.getElementById("compare").innerHTML = table + `<div class="charts" style="margin-top:10px">` +
    chart("Best score so far", data.runs.map(r => ({ label: r.label, points: r.best })), { yl: "best score", step: true, w: 560, h: 320 }) +
    chart("NDG (%)", data.runs.map(r => ({ label: r.label, points: r.ndg })), { yl: "NDG %", step: true, w: 560, h: 320 }) + "</div>";
}

// ---------------------------------------------------------------------------------------
document.querySelectorAll(".tab").forEach(b => b.addEventListener("click", () => showTab(b.dataset.tab)));
document.getElementById("run-select").addEventListener("change", e => {
  state.run = +e.target.value; state.versions = {}; state.selected = null; state.view = null;
  document.getElementById("detail").innerHTML = "";
  poll();
});
initTreeEvents();
poll();
setInterval(poll, 2000);
