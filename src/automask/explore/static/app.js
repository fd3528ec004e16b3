// automask Mask Explorer: a thin view of the JSON API under /api (see docs/explorer.md).
// Plain JavaScript, no build step, no dependencies: every action is one API call, and the
// page redraws from what the server answers. Text from the server is only ever set as
// textContent (token text is arbitrary bytes: it must never become markup).
"use strict";

const $ = (id) => document.getElementById(id);
let state = null;        // the last /api/state answer
let viewing = null;      // index of a taken step shown in the step panel (null: the pending one)
let running = false;     // "run to end" in progress (the page loops over /api/run)
let examples = [];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}) {
  const node = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// ---------------------------------------------------------------- API

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response, data;
  try {
    response = await fetch(path, init);
    data = await response.json();
  } catch (e) {
    showApiError({ code: "network", message: `the explorer server did not answer (${e})` });
    return null;
  }
  if (!response.ok) {
    if (data && data.error && data.error.code === "compile_error") showCompileError(data.error);
    else showApiError(data && data.error ? data.error : { code: String(response.status), message: "request failed" });
    return null;
  }
  showApiError(null);
  return data;
}

function showApiError(error) {
  const box = $("api-error");
  box.hidden = !error;
  box.textContent = error ? `${error.code}: ${error.message}` : "";
}

function showCompileError(error) {
  const box = $("compile-error");
  box.replaceChildren();
  if (!error) { box.hidden = true; return; }
  const c = error.compile || { type: error.code, message: error.message, location: null };
  box.append(el("span", { class: "type", "data-testid": "compile-error-type", text: c.type }), ": ",
             el("span", { "data-testid": "compile-error-message", text: c.message }));
  if (c.location) box.append(" at ", el("code", { "data-testid": "compile-error-location", text: c.location }));
  box.hidden = false;
}

// ---------------------------------------------------------------- drawing

function fmt(x, digits = 3) {
  if (x === null || x === undefined) return "∞";
  if (Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3)) return x.toExponential(2);
  return x.toFixed(digits);
}
const pct = (p) => (p >= 0.0995 ? (100 * p).toFixed(1) : (100 * p).toPrecision(2)) + "%";
const klOf = (s) => (s.kl === null ? 12 : s.kl);
const klColour = (kl) => `hsl(${130 - Math.min(kl, 6) / 6 * 125}, 70%, 84%)`;

function render(s) {
  if (!s) return;
  if (state && s.version < state.version) return;  // an older answer arriving late
  state = s;
  document.body.dataset.version = s.version;
  $("model").textContent = `${s.model.name} · ${s.prompt_tokens} prompt tokens`;
  const status = $("status");
  status.textContent = s.status.text;
  status.className = `status ${s.status.code}`;
  status.dataset.code = s.status.code;
  if (s.constraint && document.activeElement !== $("constraint") && !$("constraint").value) {
    $("kind").value = s.constraint.kind;
    $("constraint").value = s.constraint.text;
    $("prompt").value = s.prompt;
  }
  renderSettings(s.settings);
  renderChips(s);
  renderPlots(s);
  renderVerdict(s);
  const ended = s.finished !== null;
  $("step").disabled = running || ended || !s.constraint;
  $("undo").disabled = running || !s.steps.some((st) => st.action > 0);
  $("run").disabled = !running && (ended || !s.constraint);
  if (viewing !== null && viewing >= s.steps.length) viewing = null;
  if (viewing === null) renderStep(s.current);
  else showStep(viewing);
}

function renderSettings(st) {
  for (const name of ["temperature", "top_p", "seed", "max_tokens", "repetition_penalty"]) {
    const input = $(name);
    if (document.activeElement !== input) input.value = st[name] === null ? "" : st[name];
  }
  $("mask").checked = st.mask;
  $("ff").checked = st.fast_forward;
}

function renderChips(s) {
  const box = $("output");
  box.replaceChildren();
  for (const step of s.steps) {
    const classes = ["chip"];
    if (step.forced) classes.push("forced");
    if (step.chosen_by === "pick") classes.push("picked");
    if (step.eos) classes.push("eos");
    if (s.left_at !== null && step.index === s.left_at) classes.push("illegal");
    else if (s.left_at !== null && step.index > s.left_at) classes.push("outside");
    if (viewing === step.index) classes.push("selected");
    const title = `step ${step.index}: ${step.chosen_by}${step.forced ? " (fast-forwarded)" : ""}` +
      ` · token ${step.token} · legal ${step.legal_count} · Z ${fmt(step.legal_mass)} · KL ${fmt(step.kl)}` +
      (step.legal === false ? " · outside the language" : "");
    const chip = el("button", {
      class: classes.join(" "), title, "data-step": step.index, "data-forced": String(step.forced),
      "data-legal": String(step.legal), "data-token-id": step.token, "data-argmax": step.argmax,
      onclick: () => { viewing = step.index; showStep(step.index); renderChips(state); },
    });
    chip.style.background = klColour(klOf(step));
    if (step.split) {
      if (step.split[0]) chip.append(step.split[0]);
      box.append(chip);
      chip.before(el("span", { class: "break", title: "the output leaves the language here", "data-testid": "break", text: "⟂" }));
      chip.append(el("span", { class: "bad", text: step.split[1] || "∅" }));
      continue;
    }
    chip.textContent = step.visible;
    box.append(chip);
  }
  const text = s.output.text;
  $("output-text").textContent = s.left_at === null ? text
    : `${text}\n— the first ${s.output.valid_bytes} of ${s.output.bytes} bytes are a prefix of the language`;
}

function renderStep(detail) {
  const panel = $("step-panel");
  const body = $("token-table").tBodies[0];
  body.replaceChildren();
  $("renorm").replaceChildren();
  $("why").textContent = "";
  $("prediction").hidden = true;
  panel.classList.remove("hide-mask");
  $("rollback").hidden = !(detail && !detail.pending);
  $("back").hidden = viewing === null;
  panel.querySelector(".tables").style.display = detail ? "" : "none";
  if (!detail) {
    $("step-title").textContent = state && state.constraint
      ? "The output has ended: click a token above to see its step" : "Compile a constraint to start";
    $("stats").replaceChildren(); $("argmax").textContent = ""; $("expects").textContent = "";
    $("chosen-why").hidden = true;
    return;
  }
  const m = detail.measure;
  $("step-title").textContent = detail.pending
    ? `Step ${detail.index} · the next token (pending)`
    : `Step ${detail.index} · ${detail.forced ? "forced" : detail.chosen_by} “${detail.visible}”` +
      (detail.mask ? "" : " (mask off)");
  const stats = $("stats");
  stats.replaceChildren(
    el("dt", { text: "legal tokens" }), el("dt", { text: "legal mass Z" }),
    el("dt", { text: "rejected 1 − Z" }), el("dt", { text: "KL = −log Z" }),
    el("dd", { "data-testid": "legal-count", text: m.legal_count.toLocaleString() }),
    el("dd", { "data-testid": "legal-mass", text: fmt(m.legal_mass) }),
    el("dd", { "data-testid": "rejection-mass", text: fmt(m.rejection_mass) }),
    el("dd", { "data-testid": "kl", text: fmt(m.kl) }));
  const rowOf = (id) => detail.rows.find((r) => r.id === id);
  const top = rowOf(m.raw_argmax);
  const best = m.best_legal === null ? null : rowOf(m.best_legal);
  const argmax = $("argmax");
  argmax.className = `argmax ${m.argmax}`;
  argmax.dataset.verdict = m.argmax;
  argmax.textContent = !detail.inside
    ? "Outside the language: no token can bring the output back (undo, or roll back)."
    : m.argmax === "survives"
    ? `The model's top raw token “${top.visible}” survives the mask.`
    : m.argmax === "replaced"
      ? `The model's top raw token “${top.visible}” is masked: replaced by “${best ? best.visible : m.best_legal}”, the best legal token.`
      : "No legal continuation: the mask allows no token here.";
  $("expects").textContent = `The grammar expects next: ${detail.expects.summary}`;
  const chosenWhy = $("chosen-why");
  chosenWhy.hidden = !detail.why;
  chosenWhy.textContent = detail.why ? `This token left the language: ${detail.why}` : "";
  const canSteer = detail.pending && state && state.finished === null;
  for (const r of detail.rows) {
    const steer = canSteer && (r.legal || !state.settings.mask);
    const tr = el("tr", {
      "data-legal": String(r.legal), "data-token-id": r.id, "data-chosen": String(r.chosen),
      class: [steer ? "steer" : "", r.chosen ? "chosen" : ""].join(" ").trim() || null,
      title: r.legal ? (steer ? "click to take this token" : "allowed") : `masked: ${r.why || ""}`,
      onclick: steer ? () => pick(r.id) : null,
      onmouseenter: () => { $("why").textContent = r.legal ? `“${r.visible}” is allowed.` : `“${r.visible}” is masked: ${r.why || ""}`; },
    },
    el("td", { class: "tok", text: r.visible }),
    el("td", { class: "num", text: r.id }),
    el("td", { class: "num", text: fmt(r.logit, 2) }),
    el("td", { class: "num", text: pct(r.prob) }),
    el("td", { class: "mask", text: r.legal ? "allowed" : "masked" }),
    el("td", { class: "num renorm", text: r.legal ? pct(r.renorm) : "—" }));
    body.append(tr);
  }
  for (const r of detail.renormalized) {
    const bar = el("div", { class: "bar", "data-token-id": r.id, title: canSteer ? "click to take this token" : "",
                            onclick: canSteer ? () => pick(r.id) : null },
      el("span", { class: "tok", text: r.visible }), el("div"), el("span", { text: pct(r.renorm) }));
    bar.children[1].style.width = `${Math.max(1, 100 * r.renorm)}%`;
    $("renorm").append(bar);
  }
  if (detail.pending && $("predict").checked && detail.guess === null && m.argmax !== "none") {
    askPrediction(detail, top);
  }
}

function askPrediction(detail, top) {
  const box = $("prediction");
  $("step-panel").classList.add("hide-mask");
  $("argmax").textContent = ""; $("stats").replaceChildren();
  box.replaceChildren(
    el("span", { text: `Prediction check: will the model's top raw token “${top.visible}” survive the mask? ` }),
    el("button", { "data-testid": "predict-survives", onclick: () => guess(true), text: "It survives" }), " ",
    el("button", { "data-testid": "predict-masked", onclick: () => guess(false), text: "It is masked" }));
  box.hidden = false;
}

async function guess(survives) {
  const r = await api("POST", "/api/predict", { survives });
  if (!r) return;
  const detail = state.current;
  if (detail) detail.guess = survives;  // answered: draw the step with its mask revealed
  renderStep(detail);
  const box = $("prediction");
  box.replaceChildren(
    el("span", { class: r.correct ? "right" : "wrong", "data-testid": "predict-result", text: r.correct ? "Right" : "Wrong" }),
    `: it ${r.survives ? "survives" : "is masked"} · score ${r.tally.correct} of ${r.tally.asked}`);
  box.hidden = false;
}

async function showStep(index) {
  viewing = index;
  const detail = await api("GET", `/api/steps/${index}`);
  if (detail && viewing === index) renderStep(detail);
  markPlots();
}

function renderPlots(s) {
  const steps = s.steps;
  const series = [
    ["plot-legal", (st) => Math.log10(Math.max(1, st.legal_count)), (v) => `10^${v.toFixed(1)}`],
    ["plot-z", (st) => (st.legal_mass === null ? 0 : st.legal_mass), (v) => v.toFixed(2)],
    ["plot-kl", klOf, (v) => v.toFixed(1)],
  ];
  for (const [id, value, label] of series) {
    const plot = $(id);
    plot.replaceChildren();
    const W = Math.max(120, plot.clientWidth || 300), H = 80, pad = 6;
    plot.setAttribute("viewBox", `0 0 ${W} ${H}`);
    if (!steps.length) continue;
    const values = steps.map(value);
    const hi = id === "plot-z" ? 1 : Math.max(1e-9, ...values);
    const x = (i) => pad + (steps.length === 1 ? 0 : i * (W - 2 * pad) / (steps.length - 1));
    const y = (v) => H - pad - (v / hi) * (H - 2 * pad);
    plot.append(svg("polyline", { class: "line", points: values.map((v, i) => `${x(i)},${y(v)}`).join(" ") }));
    const t = svg("text", { x: 2, y: 9 }); t.textContent = `max ${label(hi)}`; plot.append(t);
    steps.forEach((st, i) => {
      const dot = svg("circle", { cx: x(i), cy: y(values[i]), r: 2.6, "data-step": i,
                                  class: st.forced ? "forced" : st.legal === false ? "illegal" : "" });
      const tip = svg("title"); tip.textContent = `step ${i}: ${label(values[i])}`; dot.append(tip);
      dot.addEventListener("mouseenter", () => { if (viewing !== i) { showStep(i); renderChips(state); } });
      plot.append(dot);
    });
  }
  markPlots();
}

function markPlots() {
  for (const id of ["plot-legal", "plot-z", "plot-kl"]) {
    const plot = $(id);
    for (const old of plot.querySelectorAll(".cursor")) old.remove();
    if (viewing === null || !state) continue;
    const dot = plot.querySelector(`circle[data-step="${viewing}"]`);
    if (!dot) continue;
    const cx = dot.getAttribute("cx");
    plot.insertBefore(svg("line", { class: "cursor", x1: cx, x2: cx, y1: 0, y2: 80 }), plot.firstChild);
  }
}

function renderVerdict(s) {
  const v = s.verdict;
  const main = $("verdict-main"), schema = $("verdict-schema"), note = $("verdict-note");
  schema.replaceChildren();
  if (!v) {
    main.textContent = "The verdict appears when the output ends.";
    note.textContent = "";
    return;
  }
  main.textContent = !v.inside
    ? `Outside the language: the output stopped being a prefix of it at step ${s.left_at}.`
    : v.complete ? "Complete: the output is a whole string of the language (accepting)."
      : s.finished === "no_continuation" ? "No legal continuation: the output cannot be completed."
        : "A valid prefix cut by the token limit: it could be completed, but it is not complete.";
  if (v.schema) {
    schema.append(el("span", { class: v.schema.valid === true ? "valid" : v.schema.valid === false ? "invalid" : "",
                               "data-testid": "schema-verdict", "data-valid": String(v.schema.valid), text: v.schema.message }));
  }
  note.textContent = v.note;
}

// ---------------------------------------------------------------- actions

async function compileNow() {
  showCompileError(null);
  viewing = null;
  const s = await api("POST", "/api/compile", {
    kind: $("kind").value, text: $("constraint").value, prompt: $("prompt").value,
    whitespace: $("whitespace").value,
  });
  render(s);
}

async function pick(tokenId) { viewing = null; render(await api("POST", "/api/pick", { token_id: tokenId })); }

async function runToEnd() {
  if (running) {                       // the button is the stop button while running
    running = false;
    await api("POST", "/api/stop");
    return;
  }
  running = true;
  viewing = null;
  $("run").textContent = "Stop";
  $("run").classList.add("running");
  $("run").dataset.running = "true";
  try {
    while (running) {
      const s = await api("POST", "/api/run", { max_steps: 4 });
      if (!s) break;
      render(s);
      if (s.finished !== null) break;
    }
  } finally {
    running = false;
    render(await api("GET", "/api/state"));
    $("run").textContent = "Run to end";
    $("run").classList.remove("running");
    $("run").dataset.running = "false";
  }
}

async function setting(name, value) { render(await api("POST", "/api/settings", { [name]: value })); }

function wire() {
  $("compile").addEventListener("click", compileNow);
  $("step").addEventListener("click", async () => { viewing = null; render(await api("POST", "/api/step", {})); });
  $("undo").addEventListener("click", async () => { viewing = null; render(await api("POST", "/api/undo")); });
  $("run").addEventListener("click", runToEnd);
  $("rollback").addEventListener("click", async () => {
    const to = viewing; viewing = null;
    if (to !== null) render(await api("POST", "/api/rollback", { step: to }));
  });
  $("back").addEventListener("click", () => { viewing = null; render(state); });
  $("mask").addEventListener("change", (e) => setting("mask", e.target.checked));
  $("ff").addEventListener("change", (e) => setting("fast_forward", e.target.checked));
  $("predict").addEventListener("change", () => render(state));
  for (const name of ["temperature", "top_p", "repetition_penalty"]) {
    $(name).addEventListener("change", (e) => setting(name, Number(e.target.value)));
  }
  $("seed").addEventListener("change", (e) => setting("seed", e.target.value === "" ? null : Number(e.target.value)));
  $("max_tokens").addEventListener("change", (e) => setting("max_tokens", Number(e.target.value)));
  $("kind").addEventListener("change", () => { $("whitespace-label").hidden = $("kind").value !== "schema"; });
}

async function loadExamples() {
  const r = await api("GET", "/api/examples");
  if (!r) return;
  examples = r.examples;
  const box = $("examples");
  box.replaceChildren(el("span", { class: "hint", text: "Examples:" }));
  for (const ex of examples) {
    box.append(el("button", {
      "data-testid": `example-${ex.name}`, title: `${ex.kind}: load and compile`,
      onclick: () => {
        $("kind").value = ex.kind; $("constraint").value = ex.text; $("prompt").value = ex.prompt;
        $("whitespace-label").hidden = ex.kind !== "schema";
        compileNow();
      },
    }, ex.name, " ", el("span", { class: "kind", text: ex.kind })));
  }
}

async function main() {
  wire();
  await loadExamples();
  render(await api("GET", "/api/state"));
  window.addEventListener("resize", () => state && renderPlots(state));
}

main();
