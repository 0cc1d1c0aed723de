// The judging page's script (retrieval_lab/judging/server.py inlines it). Vanilla JS; it talks only to the
// server that sent it, through relative URLs under the page's own token path.
// Every text (queries, documents, names) reaches the page through textContent or a text node, never as markup.
"use strict";
(function () {
  const BOOT = JSON.parse(document.getElementById("judge-data").textContent);
  const LABELS = [];
  for (let l = BOOT.labels.min; l <= BOOT.labels.max; l++) LABELS.push(l);
  const params = new URLSearchParams(location.search);
  const state = {
    assessor: params.get("assessor") || "",
    queue: params.get("queue") === "sensitivity" && BOOT.comparison ? "sensitivity" : "pool",
    reveal: params.get("reveal") === "1",
    tab: params.get("tab") || "judge",
    view: null,        // the server's last View of the current pair
    position: null,    // null: at the queue's next pair; i: reviewing view.history[i]
    lastRow: null,     // the id of this tab's last label or skip (undo takes back the assessor's newest)
    status: "",
  };
  let chain = Promise.resolve(); // every action runs after the previous one: no key press is lost or reordered

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children || []) node.append(c);
    return node;
  }
  const fmt = (x, digits = 4) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
  const signed = (x) => (x === null || x === undefined ? "–" : (x >= 0 ? "+" : "") + Number(x).toFixed(4));

  // ------------------------------------------------------------------ talking to the server
  async function call(method, path, body) {
    const options = {method, headers: {}, credentials: "same-origin", cache: "no-store"};
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.headers["X-Judge-CSRF"] = BOOT.csrf;
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
    return answer;
  }
  function query(extra) {
    const q = new URLSearchParams({assessor: state.assessor, queue: state.queue, reveal: state.reveal ? "1" : "0"});
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q.toString();
  }
  function act(fn) {
    chain = chain.then(fn).then(() => say(""), (e) => say(e.message, true));
    return chain;
  }
  function remember() {
    const q = new URLSearchParams();
    if (state.assessor) q.set("assessor", state.assessor);
    if (state.queue !== "pool") q.set("queue", state.queue);
    if (state.reveal) q.set("reveal", "1");
    if (state.tab !== "judge") q.set("tab", state.tab);
    history.replaceState(null, "", "?" + q.toString()); // a reload resumes as it was
  }

  // ------------------------------------------------------------------ the frame
  const app = document.getElementById("app");
  const statusLine = el("div", {id: "status", class: "status", role: "status"});
  const main = el("main", {id: "main"});
  function say(text, error) {
    statusLine.textContent = text;
    statusLine.className = error ? "status error" : "status";
  }
  function tabs() {
    const names = [["judge", "Judge"], ["agreement", "Agreement"], ["adjudicate", "Adjudicate"]];
    if (BOOT.comparison) names.push(["sensitivity", "Judgments that matter"]);
    return el("nav", {class: "tabs"}, names.map(([id, text]) =>
      el("button", {id: `tab-${id}`, class: state.tab === id ? "tab on" : "tab", type: "button",
                    onclick: () => { state.tab = id; remember(); draw(); }, text})));
  }
  function header() {
    const who = el("span", {id: "who", text: state.assessor ? `Assessor: ${state.assessor}` : "No assessor"});
    const change = el("button", {type: "button", id: "change-assessor", text: "change",
                                 onclick: () => { state.assessor = ""; state.view = null; remember(); draw(); }});
    return el("header", {}, [el("h1", {text: "Judge"}),
      el("div", {class: "meta"}, [who, " ", change, el("span", {class: "db", text: ` · ${BOOT.database} · ` +
        `${BOOT.pairs} pairs · labels ${BOOT.labels.min}–${BOOT.labels.max}`})]), tabs()]);
  }
  function draw() {
    app.replaceChildren(header(), statusLine, main);
    if (!state.assessor) return drawLogin();
    if (state.tab === "agreement") return act(drawAgreement);
    if (state.tab === "adjudicate") return act(drawAdjudicate);
    if (state.tab === "sensitivity" && BOOT.comparison) return act(drawSensitivity);
    state.tab = "judge";
    if (state.view) return drawJudge();
    return act(loadNext);
  }

  // ------------------------------------------------------------------ who judges
  function drawLogin() {
    const input = el("input", {id: "assessor-name", type: "text", autocomplete: "username", maxlength: "64",
                               placeholder: "your name"});
    const form = el("form", {id: "login", onsubmit: (e) => {
      e.preventDefault();
      const name = input.value.trim();
      if (!name) return;
      state.assessor = name;
      state.view = null;
      remember();
      draw();
    }}, [el("label", {for: "assessor-name", text: "Judge as "}), input, el("button", {type: "submit", text: "start"})]);
    const children = [form];
    if (BOOT.assessors.length) {
      children.push(el("p", {class: "help", text: `Assigned assessors: ${BOOT.assessors.join(", ")}.`}));
    }
    children.push(el("p", {class: "help", text: "Judging is blind: which run found a document, and at what " +
      "rank, is hidden unless you ask (key v)."}));
    main.replaceChildren(...children);
    input.focus();
  }

  // ------------------------------------------------------------------ judging
  function highlighted(text, terms, id) {
    // text nodes and <mark> elements holding text nodes: no markup is ever parsed
    const span = el("span", id ? {id} : {});
    if (!terms.size) { span.textContent = text; return span; }
    const word = /[\p{L}\p{M}\p{N}_]+/gu;
    let last = 0, m;
    while ((m = word.exec(text)) !== null) {
      if (!terms.has(m[0].toLowerCase())) continue;
      if (m.index > last) span.append(document.createTextNode(text.slice(last, m.index)));
      span.append(el("mark", {text: m[0]}));
      last = m.index + m[0].length;
    }
    if (last < text.length) span.append(document.createTextNode(text.slice(last)));
    return span;
  }
  function show(view) {
    state.view = view;
    if (state.tab === "judge") drawJudge();
  }
  async function loadNext() {
    state.position = null;
    show(await call("GET", `api/next?${query()}`));
  }
  async function loadPair(pair) {
    show(await call("GET", `api/item?${query({query_id: pair[0], doc_id: pair[1]})}`));
  }
  function keysHelp() {
    const labels = LABELS.map((l) => String(l)).join(" ");
    return el("p", {class: "help", id: "keys", text: `Keys: ${labels} label · s skip · u undo · ` +
      "p previous · n next · v show systems"});
  }
  function drawJudge() {
    const v = state.view;
    if (!v) return;
    const p = v.progress;
    const progress = el("div", {class: "progress"}, [
      el("progress", {id: "progress-bar", max: String(Math.max(p.total, 1)), value: String(p.labelled)}),
      el("span", {id: "progress", text: `${p.labelled} of ${p.total} labelled` +
        (p.skipped ? ` · ${p.skipped} skipped` : "") + (state.queue === "sensitivity" ? " · queue: judgments " +
        "that matter first" : "")})]);
    const children = [progress];
    if (!v.item) {
      children.push(el("p", {id: "done", class: "done", text: "Every pair of your queue is labelled. " +
        "Press p to review, or see the agreement."}));
      children.push(keysHelp());
      main.replaceChildren(...children);
      return;
    }
    const terms = new Set(v.terms);
    const item = v.item;
    children.push(el("section", {class: "query"}, [el("div", {class: "what", text: `Query ${item.query_id}`}),
      el("div", {class: "qtext"}, [highlighted(item.query_text, terms, "query-text")])]));
    const doc = el("section", {class: "doc"}, [
      el("div", {class: "what", text: `Document ${item.doc_id}`}),
      el("h2", {}, [highlighted(item.title, terms, "doc-title")]),
      el("div", {class: "dtext"}, [highlighted(item.text, terms, "doc-text")])]);
    if (!BOOT.whole_texts) doc.append(el("p", {class: "help", text: "The pool's snippet (300 characters): " +
      "start judge with --dataset for whole texts."}));
    if (state.reveal && item.retrievers) {
      doc.append(el("p", {id: "systems", class: "systems", text: `Found by ${item.retrievers.join(", ") || "–"}` +
        `, best rank ${item.best_rank ?? "–"}`}));
    }
    children.push(doc);
    const buttons = LABELS.map((l) => el("button", {type: "button", class: v.label === l ? "label on" : "label",
      "data-label": String(l), text: String(l), onclick: () => act(() => labelIt(l))}));
    children.push(el("div", {class: "labels"}, [
      el("span", {id: "current-label", text: v.label === null ? "unlabelled" : `your label: ${v.label}`}),
      ...buttons,
      el("button", {type: "button", text: "skip (s)", onclick: () => act(skipIt)}),
      el("button", {type: "button", text: "undo (u)", onclick: () => act(undoIt)})]));
    children.push(keysHelp());
    main.replaceChildren(...children);
  }
  async function labelIt(label) {
    const v = state.view;
    if (!v || !v.item) return;
    const answer = await call("POST", "api/label", {assessor: state.assessor, query_id: v.item.query_id,
      doc_id: v.item.doc_id, label, queue: state.queue, reveal: state.reveal});
    state.lastRow = answer.row.id;
    state.position = null;
    show(answer.view);
  }
  async function skipIt() {
    const v = state.view;
    if (!v || !v.item) return;
    const answer = await call("POST", "api/skip", {assessor: state.assessor, query_id: v.item.query_id,
      doc_id: v.item.doc_id, queue: state.queue, reveal: state.reveal});
    state.position = null;
    show(answer.view);
  }
  async function undoIt() {
    const answer = await call("POST", "api/undo", {assessor: state.assessor, queue: state.queue,
      reveal: state.reveal});
    state.position = null;
    show(answer.view);
    say(answer.row ? `took back your ${answer.row.kind} of ${answer.row.doc_id}` : "nothing to undo");
  }
  async function previous() {
    const v = state.view;
    if (!v || !v.history.length) return;
    const at = state.position === null ? v.history.length : state.position;
    if (at === 0) return;
    state.position = at - 1;
    await loadPair(v.history[state.position]);
  }
  async function next() {
    const v = state.view;
    if (state.position === null) return;
    if (state.position + 1 >= v.history.length) return loadNext();
    state.position += 1;
    await loadPair(v.history[state.position]);
  }
  document.addEventListener("keydown", (e) => {
    if (!state.assessor || e.ctrlKey || e.metaKey || e.altKey) return;
    const target = e.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (state.tab !== "judge") return;
    const key = e.key;
    if (/^[0-9]$/.test(key) && LABELS.includes(Number(key))) { e.preventDefault(); act(() => labelIt(Number(key))); }
    else if (key === "s") { e.preventDefault(); act(skipIt); }
    else if (key === "u" || key === "Backspace") { e.preventDefault(); act(undoIt); }
    else if (key === "p" || key === "ArrowLeft") { e.preventDefault(); act(previous); }
    else if (key === "n" || key === "ArrowRight") { e.preventDefault(); act(next); }
    else if (key === "v") {
      e.preventDefault();
      state.reveal = !state.reveal;
      remember();
      const v = state.view;
      act(() => (v && v.item ? loadPair([v.item.query_id, v.item.doc_id]) : loadNext()));
    }
  });

  // ------------------------------------------------------------------ agreement and adjudication
  function kappaText(k) {
    if (k.name === "none") return "κ needs two assessors";
    const name = k.name === "cohen" ? "Cohen's κ" : "Fleiss' κ";
    return `${name} ${fmt(k.value, 3)} over ${k.items} pairs`;
  }
  function table(id, head, rows) {
    return el("table", {id}, [el("thead", {}, [el("tr", {}, head.map((h) => el("th", {text: h})))]),
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => (c instanceof Node ? el("td", {}, [c]) :
        el("td", {text: String(c)}))))))]);
  }
  async function drawAgreement() {
    const a = await call("GET", "api/agreement");
    if (state.tab !== "agreement") return;
    const out = [el("h2", {text: "Agreement"})];
    if (!a.items) {
      out.push(el("p", {id: "agreement-summary", text: "No pair is labelled by two assessors yet."}));
      main.replaceChildren(...out);
      return;
    }
    out.push(el("p", {id: "agreement-summary", text: `${a.assessors.join(", ")}: ${a.items} pairs labelled by ` +
      `two or more, raw agreement ${fmt(a.raw, 3)}, ${kappaText(a.kappa)}; ${a.disagreements.length} ` +
      `disagreements (${a.unresolved} not adjudicated).`}));
    out.push(el("h3", {text: "Every two assessors"}));
    out.push(table("agreement-pairs", ["assessors", "pairs", "agreeing", "raw", "Cohen's κ"],
      a.pairs.map((p) => [`${p.first} & ${p.second}`, p.items, p.agreeing, fmt(p.raw, 3), fmt(p.cohen_kappa, 3)])));
    out.push(el("h3", {text: "Per query"}));
    out.push(table("agreement-queries", ["query", "pairs", "agreeing", "raw", "κ"],
      a.per_query.map((q) => [q.query_id, q.items, q.agreeing, fmt(q.raw, 3), kappaText(q.kappa)])));
    main.replaceChildren(...out);
  }
  async function drawAdjudicate() {
    const a = await call("GET", "api/agreement");
    if (state.tab !== "adjudicate") return;
    const out = [el("h2", {text: "Disagreements"}),
      el("p", {class: "help", text: `Your decision (as ${state.assessor}) becomes the pair's label in the export.`})];
    if (!a.disagreements.length) {
      out.push(el("p", {id: "no-disagreement", text: "No disagreement."}));
      main.replaceChildren(...out);
      return;
    }
    const rows = a.disagreements.map((d) => {
      const given = Object.entries(d.labels).map(([who, l]) => `${who}: ${l}`).join(", ");
      const choose = el("span", {class: "choose"}, LABELS.map((l) => el("button", {type: "button",
        class: d.decision === l ? "label on" : "label", "data-label": String(l), text: String(l),
        onclick: () => act(async () => {
          await call("POST", "api/adjudicate", {adjudicator: state.assessor, query_id: d.query_id,
                                                 doc_id: d.doc_id, label: l});
          await drawAdjudicate();
        })})));
      const decision = d.decision === null ? "open" : `${d.decision} (${d.adjudicator})`;
      const tr = el("tr", {"data-pair": `${d.query_id}\t${d.doc_id}`}, [el("td", {text: d.query_id}),
        el("td", {text: d.doc_id}), el("td", {text: given}), el("td", {class: "decision", text: decision}),
        el("td", {}, [choose])]);
      return tr;
    });
    out.push(el("table", {id: "disagreements"}, [el("thead", {}, [el("tr", {}, ["query", "document", "labels",
      "decision", "decide"].map((h) => el("th", {text: h})))]), el("tbody", {}, rows)]));
    main.replaceChildren(...out);
  }

  // ------------------------------------------------------------------ the judgments that matter
  async function drawSensitivity() {
    const s = await call("GET", `api/sensitivity?${query()}`);
    if (state.tab !== "sensitivity") return;
    const out = [el("h2", {text: `${s.head} against ${s.base} on ${s.measure}`})];
    const rows = [["before this session", s.before], ["now", s.after],
                  ["if every unjudged were relevant", s.if_all_relevant],
                  ["if no unjudged were relevant", s.if_none_relevant],
                  [`if those favouring ${s.head} were relevant`, s.if_favouring_head],
                  [`if those favouring ${s.base} were relevant`, s.if_favouring_base]];
    out.push(table("standings", ["with the labels", "judged pairs", "queries", `${s.base}`, `${s.head}`, "difference",
      "interval", "verdict", `Judged@${s.depth} ${s.base}`, `Judged@${s.depth} ${s.head}`],
      rows.map(([name, x]) => (x === null ? [name, "–", "–", "–", "–", "–", "–", "nothing to compare", "–", "–"] :
        [name, x.judgments, x.queries, fmt(x.base_mean), fmt(x.head_mean), signed(x.difference),
         `[${signed(x.ci_low)}, ${signed(x.ci_high)}]`, x.verdict, fmt(x.judged_base, 3), fmt(x.judged_head, 3)]))));
    const span = s.difference_range;
    out.push(el("p", {id: "sensitivity-summary", text: `${s.unjudged} unjudged documents in either run's top ` +
      `${s.depth} (${s.not_in_pool} not in the pool). Labelled as above, they move the difference between ` +
      `${span ? signed(span[0]) : "–"} and ${span ? signed(span[1]) : "–"}; ` +
      (s.verdict_can_change ? "the verdict can change: judge them." : "the verdict does not depend on them.")}));
    const use = el("button", {type: "button", id: "use-queue", text: state.queue === "sensitivity" ?
      "judging in this order (back to pool order)" : "judge in this order", onclick: () => {
        state.queue = state.queue === "sensitivity" ? "pool" : "sensitivity";
        state.view = null;
        state.tab = "judge";
        remember();
        draw();
      }});
    out.push(use);
    if (state.reveal) {
      out.push(table("candidates", ["query", "document", `rank in ${s.base}`, `rank in ${s.head}`, "effect if relevant"],
        s.candidates.slice(0, 50).map((x) => [x.query_id, x.doc_id, x.base_rank ?? "–", x.head_rank ?? "–",
                                              signed(x.effect)])));
    } else {
      out.push(el("p", {class: "help", text: "Which document each run ranks where is hidden while judging blind " +
        "(key v on the judge tab shows it)."}));
    }
    main.replaceChildren(...out);
  }

  draw();
  window.__judgeReady = true;
})();
