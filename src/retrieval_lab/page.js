// The comparison page's script (retrieval_lab/page.py inlines it). Vanilla JS, no request to any host.
// Every text of the data reaches the page through textContent or a text node, never as markup.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("page-data").textContent);
  const Q = DATA.queries;
  const ROWS_PER_PAGE = 200; // rows put in the table at a time: the rest wait for "show more"
  const DEPTHS = [5, 10, 20, 50, 100];
  const state = {pair: 0, measure: DATA.measure || (DATA.measures.length ? DATA.measures[0] : DATA.rbo_name),
                 stratum: "", cls: "", search: "", sort: "difference", desc: false, shown: ROWS_PER_PAGE,
                 query: null, depth: 10};

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
  const fmt = (x) => (x === null || x === undefined ? "–" : x.toFixed(4));
  const signed = (x) => (x === null || x === undefined ? "–" : (x >= 0 ? "+" : "") + x.toFixed(4));
  const runName = (i) => DATA.runs[i];

  // ------------------------------------------------------------------ summary
  function summary() {
    const s = DATA.summary;
    const box = el("section", {id: "summary"}, [el("h2", {text: s.heading})]);
    if (s.gate) {
      const gate = el("div", {id: "gate", class: "gate"}, [el("strong", {text: "Gate: "}),
        el("span", {id: "gate-decision", text: s.gate.decision})]);
      if (s.gate.reasons.length) gate.append(el("ul", {}, s.gate.reasons.map((r) => el("li", {text: r}))));
      box.append(gate);
    }
    if (s.rows.length) {
      const head = el("tr", {}, ["stratum", "measure", ...s.columns].map((c) => el("th", {text: c})));
      const body = s.rows.map((r, i) => {
        const c = r.cells;
        const cells = [r.stratum, r.measure, r.baseline, r.candidate, ...c];
        const tr = el("tr", {class: r.excludes_zero ? "significant" : "", "data-row": String(i)},
                      cells.map((x) => el("td", {text: x})));
        return tr;
      });
      box.append(el("table", {id: "summary-table", class: "summary"}, [el("thead", {}, [head]),
                                                                        el("tbody", {}, body)]));
    }
    box.append(el("p", {class: "rule", text: s.rule}));
    for (const n of s.notes) box.append(el("p", {class: "note", text: n}));
    return box;
  }

  // ------------------------------------------------------------------ the per-query table
  function pairOf(i) { return DATA.pairs[i]; }
  function valueOf(run, measure, q) {
    const v = DATA.values[run][measure];
    return v ? v[q] : null;
  }
  function rowData(q) {
    const [a, b] = pairOf(state.pair);
    const rbo = DATA.rbo[state.pair][q];
    let base = null, cand = null, diff = null;
    if (state.measure === DATA.rbo_name) {
      diff = rbo;
    } else {
      base = valueOf(a, state.measure, q);
      cand = valueOf(b, state.measure, q);
      diff = base === null || cand === null ? null : cand - base;
    }
    return {q, id: Q.id[q], text: Q.text[q], base, cand, difference: diff, rbo,
            stratum: Q.stratum[q], cls_base: DATA.classes[a][q], cls_cand: DATA.classes[b][q],
            judged_base: DATA.judged[a][q], judged_cand: DATA.judged[b][q]};
  }
  const SORT_KEYS = {id: "id", text: "text", base: "base", cand: "cand", difference: "difference", rbo: "rbo",
                     stratum: "stratum", cls_base: "cls_base", cls_cand: "cls_cand", judged: "judged_cand"};
  function filtered() {
    const needle = state.search.trim().toLowerCase();
    const rows = [];
    for (let q = 0; q < Q.id.length; q++) {
      if (state.stratum && Q.stratum[q] !== state.stratum) continue;
      const [a, b] = pairOf(state.pair);
      if (state.cls && DATA.classes[a][q] !== state.cls && DATA.classes[b][q] !== state.cls) continue;
      if (needle && !(Q.text[q].toLowerCase().includes(needle) || Q.id[q].toLowerCase().includes(needle))) continue;
      rows.push(rowData(q));
    }
    const key = SORT_KEYS[state.sort];
    const dir = state.desc ? -1 : 1;
    rows.sort((x, y) => {
      const u = x[key], v = y[key];
      if (u === v) return x.q - y.q;
      if (u === null || u === undefined) return 1; // missing values last, either way
      if (v === null || v === undefined) return -1;
      return (u < v ? -1 : 1) * dir;
    });
    return rows;
  }
  function controls() {
    const pair = el("select", {id: "pair", onchange: (e) => {
      state.pair = +e.target.value;
      refresh();
      if (state.query !== null) openQuery(state.query, false); // the open query, now of this pair
    }},
      DATA.pairs.map(([a, b], i) => el("option", {value: String(i), text: `${runName(a)} → ${runName(b)}`})));
    const measure = el("select", {id: "measure", onchange: (e) => { state.measure = e.target.value; refresh(); }},
      [...DATA.measures, DATA.rbo_name].map((m) => el("option", {value: m, text: m})));
    measure.value = state.measure;
    const strata = [...new Set(Q.stratum.filter((s) => s !== null))].sort();
    const stratum = el("select", {id: "stratum", onchange: (e) => { state.stratum = e.target.value; refresh(); }},
      [el("option", {value: "", text: "every stratum"}), ...strata.map((s) => el("option", {value: s, text: s}))]);
    const classes = [...new Set(DATA.classes.flat().filter((c) => c !== null))].sort();
    const cls = el("select", {id: "class", onchange: (e) => { state.cls = e.target.value; refresh(); }},
      [el("option", {value: "", text: "every class"}), ...classes.map((c) => el("option", {value: c, text: c}))]);
    const search = el("input", {id: "search", type: "search", placeholder: "search query text or id",
                                oninput: (e) => { state.search = e.target.value; refresh(); }});
    return el("div", {class: "controls"}, [
      el("label", {}, ["pair ", pair]), el("label", {}, ["measure ", measure]),
      el("label", {}, ["stratum ", stratum]), el("label", {}, ["class (either run) ", cls]), search]);
  }
  function header() {
    const [a, b] = pairOf(state.pair);
    const isRbo = state.measure === DATA.rbo_name;
    // by RBO the difference column is the RBO: no measure values, and no second RBO column
    const cols = [["id", "query"], ["text", "text"],
                  ...(isRbo ? [] : [["base", `${runName(a)}`], ["cand", `${runName(b)}`]]),
                  ["difference", isRbo ? DATA.rbo_name : "difference"], ...(isRbo ? [] : [["rbo", DATA.rbo_name]]),
                  ["stratum", "stratum"], ["cls_base", `class ${runName(a)}`], ["cls_cand", `class ${runName(b)}`],
                  ["judged", `judged@${DATA.judged_k}`]];
    return el("tr", {}, cols.map(([key, label]) => {
      const mark = state.sort === key ? (state.desc ? " ▼" : " ▲") : "";
      return el("th", {class: "sortable", "data-sort": key, text: label + mark, onclick: () => {
        state.desc = state.sort === key ? !state.desc : false;
        state.sort = key;
        refresh();
      }});
    }));
  }
  function judgedText(r) {
    if (r.judged_base === null && r.judged_cand === null) return "–";
    return `${fmt(r.judged_base)} / ${fmt(r.judged_cand)}`;
  }
  function tableRow(r) {
    const isRbo = state.measure === DATA.rbo_name;
    const diffClass = isRbo || r.difference === null ? "" : r.difference > 0 ? "gain" : r.difference < 0 ? "loss" : "";
    const tr = el("tr", {class: "query-row", "data-query": r.id, tabindex: "0",
                         onclick: () => openQuery(r.q), onkeydown: (e) => { if (e.key === "Enter") openQuery(r.q); }}, [
      el("td", {class: "qid", text: r.id}), el("td", {class: "qtext", text: r.text}),
      ...(isRbo ? [] : [el("td", {class: "num base", text: fmt(r.base)}), el("td", {class: "num cand", text: fmt(r.cand)})]),
      el("td", {class: "num diff " + diffClass, text: isRbo ? fmt(r.difference) : signed(r.difference)}),
      ...(isRbo ? [] : [el("td", {class: "num rbo", text: fmt(r.rbo)})]),
      el("td", {class: "stratum", text: r.stratum || "–"}),
      el("td", {class: "cls", text: r.cls_base || "–"}), el("td", {class: "cls", text: r.cls_cand || "–"}),
      el("td", {class: "num", text: judgedText(r)})]);
    if (state.query === r.q) tr.classList.add("open");
    return tr;
  }
  function refresh() {
    const rows = filtered();
    const table = document.getElementById("queries-table");
    table.replaceChildren(el("thead", {}, [header()]),
                          el("tbody", {}, rows.slice(0, state.shown).map(tableRow)));
    const count = document.getElementById("row-count");
    count.textContent = `${rows.length} of ${Q.id.length} queries` +
      (rows.length > state.shown ? `, first ${state.shown} shown` : "");
    const more = document.getElementById("more");
    more.hidden = rows.length <= state.shown;
  }

  // ------------------------------------------------------------------ the query view
  function highlighted(text, terms) {
    // split the text into text nodes and <mark> elements holding text nodes: no markup is ever parsed
    const span = el("span", {class: "doctext"});
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
  function gradesOf(q) {
    const grades = new Map();
    for (const [d, g] of DATA.qrels[q] || []) grades.set(d, g);
    return grades;
  }
  function diagnosisWords(run, q) {
    const cls = DATA.classes[run][q];
    const ranks = DATA.judged_ranks[run][q];
    // the judged documents' ranks, in DATA.qrels[q]'s order: a positive is one graded above 0
    const found = (ranks || []).filter((r, i) => r !== null && DATA.qrels[q][i][1] > 0);
    const where = ranks === null ? "" : found.length ? `first positive at rank ${Math.min(...found)}`
                                                     : "no positive retrieved";
    if (cls === null) return `${runName(run)}: ${where || "no diagnosis or judgments on this page"}.`;
    return `${runName(run)}: ${cls} — ${DATA.class_words[cls] || cls}` + (where ? ` (${where}).` : ".");
  }
  function column(run, other, q, grades, terms, side) {
    const ranking = (DATA.rankings[run][q] || []).slice(0, state.depth);
    const otherRanking = (DATA.rankings[other][q] || []).slice(0, state.depth);
    const otherRank = new Map(otherRanking.map((d, i) => [d, i + 1]));
    const list = el("ol", {class: "ranking", id: `ranking-${side}`});
    ranking.forEach((d, i) => {
      const rank = i + 1;
      const g = grades.has(d) ? grades.get(d) : null;
      const badge = g === null ? el("span", {class: "grade unjudged", text: DATA.qrels[q] ? "unjudged" : ""})
                               : el("span", {class: "grade " + (g > 0 ? "relevant" : "nonrelevant"), text: `grade ${g}`});
      const o = otherRank.get(d);
      let move;
      if (o === undefined) {
        move = el("span", {class: "move only", text: "only here"});
      } else {
        const delta = o - rank;
        const label = delta === 0 ? "same rank" : `${side === "left" ? "→" : "←"} rank ${o}`;
        move = el("a", {class: "move", href: "#", "data-target": `${side === "left" ? "right" : "left"}-${d}`,
                        text: label, onclick: (e) => {
                          e.preventDefault();
                          const target = document.getElementById(e.target.getAttribute("data-target"));
                          if (target) { target.scrollIntoView({block: "center"}); target.classList.add("flash");
                                        setTimeout(() => target.classList.remove("flash"), 1200); }
                        }});
      }
      const li = el("li", {id: `${side}-${d}`, class: "doc" + (g !== null && g > 0 ? " positive" : ""),
                           "data-doc": DATA.docs.id[d], "data-rank": String(rank)}, [
        el("div", {class: "dochead"}, [el("span", {class: "rank", text: `#${rank}`}),
                                       el("span", {class: "docid", text: DATA.docs.id[d]}), badge, move]),
        highlighted(DATA.docs.text[d], terms)]);
      list.append(li);
    });
    if (!ranking.length) list.append(el("li", {class: "empty", text: "no document retrieved"}));
    return el("div", {class: "column"}, [el("h4", {text: runName(run)}), list]);
  }
  function missingPositives(q, a, b) {
    const rows = [];
    const qrel = DATA.qrels[q] || [];
    const shown = [a, b].map((r) => new Set((DATA.rankings[r][q] || []).slice(0, state.depth)));
    qrel.forEach(([d, g], i) => {
      if (g <= 0 || shown[0].has(d) || shown[1].has(d)) return;
      const where = [a, b].map((r) => {
        const rank = DATA.judged_ranks[r][q] ? DATA.judged_ranks[r][q][i] : null;
        return `${runName(r)}: ${rank === null ? "not retrieved" : "rank " + rank}`;
      }).join("; ");
      rows.push(el("li", {"data-doc": DATA.docs.id[d]}, [
        el("span", {class: "docid", text: DATA.docs.id[d]}), el("span", {class: "grade relevant", text: `grade ${g}`}),
        el("span", {class: "where", text: where}), el("div", {}, [highlighted(DATA.docs.text[d], new Set(Q.terms[q]))])]));
    });
    if (!DATA.qrels[q]) return el("p", {id: "missing", text: "No judgments for this query on this page."});
    if (!rows.length) return el("p", {id: "missing", text: `Every positive is in the top ${state.depth} of a run.`});
    return el("div", {}, [el("h4", {text: `Positives neither run shows in its top ${state.depth}`}),
                          el("ul", {id: "missing", class: "missing"}, rows)]);
  }
  function depthChoices() {
    // the usual depths below what the page stores, then the stored depth itself (when it is at most 100)
    const below = DEPTHS.filter((d) => d < DATA.depth);
    return DATA.depth > 0 && DATA.depth <= 100 ? [...below, DATA.depth] : below;
  }
  function openQuery(q, scroll = true) {
    if (!depthChoices().includes(state.depth)) state.depth = Math.min(10, DATA.depth) || 10;
    state.query = q;
    const [a, b] = pairOf(state.pair);
    const view = document.getElementById("query-view");
    const grades = gradesOf(q);
    const terms = new Set(Q.terms[q]);
    const depth = el("select", {id: "depth", onchange: (e) => { state.depth = +e.target.value; openQuery(q, false); }},
      depthChoices().map((d) => el("option", {value: String(d), text: String(d)})));
    depth.value = String(state.depth);
    const measures = el("table", {id: "query-measures", class: "summary"}, [
      el("thead", {}, [el("tr", {}, ["measure", runName(a), runName(b), "difference"].map((t) => el("th", {text: t})))]),
      el("tbody", {}, [...DATA.measures.map((m) => {
        const u = valueOf(a, m, q), v = valueOf(b, m, q);
        return el("tr", {"data-measure": m}, [el("td", {text: m}), el("td", {class: "num", text: fmt(u)}),
          el("td", {class: "num", text: fmt(v)}), el("td", {class: "num", text: u === null || v === null ? "–" : signed(v - u)})]);
      }), el("tr", {"data-measure": DATA.rbo_name}, [el("td", {text: DATA.rbo_name}),
           el("td", {class: "num", text: fmt(DATA.rbo[state.pair][q]), colspan: "3"})])])]);
    view.replaceChildren(
      el("h3", {}, [el("span", {id: "query-id", text: Q.id[q]}), document.createTextNode(" "),
                    el("span", {id: "query-text", text: Q.text[q]})]),
      el("p", {class: "meta", text: (Q.stratum[q] ? `stratum: ${Q.stratum[q]}. ` : "") +
               (Q.terms[q].length ? `highlighted: ${Q.terms[q].join(", ")}` : "")}),
      el("ul", {id: "diagnosis", class: "diagnosis"}, [a, b].map((r) => el("li", {text: diagnosisWords(r, q)}))),
      measures,
      el("label", {}, ["depth ", depth]),
      el("div", {class: "columns"}, [column(a, b, q, grades, terms, "left"), column(b, a, q, grades, terms, "right")]),
      missingPositives(q, a, b));
    for (const tr of document.querySelectorAll("tr.query-row")) {
      tr.classList.toggle("open", tr.getAttribute("data-query") === Q.id[q]);
    }
    view.hidden = false;
    if (scroll) view.scrollIntoView({block: "start"});
  }

  // ------------------------------------------------------------------ the page
  const app = document.getElementById("app");
  app.append(
    el("h1", {text: DATA.title}),
    el("p", {class: "note", text: DATA.note}),
    summary(),
    el("section", {id: "queries"}, [
      el("h2", {text: "Queries"}),
      el("p", {class: "help", text: "Click a row to see both rankings. Click a header to sort. Difference: " +
                                    "candidate − baseline; RBO: how much the two rankings agree (1: same order)."}),
      controls(), el("p", {id: "row-count"}),
      el("table", {id: "queries-table", class: "queries"}),
      el("button", {id: "more", type: "button", text: "show more",
                    onclick: () => { state.shown += ROWS_PER_PAGE; refresh(); }})]),
    el("section", {id: "query-view", hidden: ""}));
  if (!DATA.measures.length) state.sort = "difference"; // RBO: most different first (ascending)
  refresh();
  window.__pageReadyAt = performance.now(); // since navigation began (scripts/bench_page.py reads it)
  window.__pageReady = true;
})();
