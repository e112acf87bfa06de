// The latent-code explorer's page: a canvas scatter of the codes linked to each row's instance picture, its
// per-head code at the site and its attention rows. Reads the JSON in #lc-data (latentcode/explore/page.py).
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("lc-data").textContent);
  const $ = (id) => document.getElementById(id);
  const root = $("lc-root");
  const TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];
  const W = 480, H = 420, PAD = 12, R = 3;
  const state = { label: D.label, hover: -1, clicked: -1, selected: null, mode: "box", drag: null };
  let pictures = null, codes = null, pattern = null, low = null, high = null;

  function bytes(b64) {
    const s = atob(b64);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  async function unpack(b64) {
    const stream = new Blob([bytes(b64)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer();
  }
  function escapeText(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  // --- colours -------------------------------------------------------------------------------------------
  function catColour(i, n) {
    return n <= 10 ? TAB10[i] : `hsl(${Math.round((i * 137.508) % 360)},65%,50%)`;
  }
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function numColour(v) {
    const t = Math.min(1, Math.max(0, v)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i;
    const c = VIRIDIS[i].map((a, k) => Math.round(a + f * (VIRIDIS[i + 1][k] - a)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  function pointColours() {
    const L = D.labels[state.label];
    if (L.kind === "cat") return L.index.map((i) => catColour(i, L.names.length));
    let lo = Infinity, hi = -Infinity;
    for (const v of L.values) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    L.lo = lo; L.hi = hi;
    return L.values.map((v) => numColour(hi > lo ? (v - lo) / (hi - lo) : 0.5));
  }
  function heat(v, lo, hi) { // sequential for non-negative values, diverging around 0 otherwise
    if (lo >= 0) {
      const t = hi > 0 ? v / hi : 0;
      return `rgb(${Math.round(255 - 234 * t)},${Math.round(255 - 154 * t)},${Math.round(255 - 63 * t)})`;
    }
    const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1, t = v / m;
    return t >= 0 ? `rgb(255,${Math.round(255 - 200 * t)},${Math.round(255 - 200 * t)})`
      : `rgb(${Math.round(255 + 200 * t)},${Math.round(255 + 200 * t)},255)`;
  }

  // --- the scatter ---------------------------------------------------------------------------------------
  const canvas = $("lc-scatter");
  const dpr = window.devicePixelRatio || 1;
  canvas.width = W * dpr; canvas.height = H * dpr;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  const px = new Float32Array(D.n), py = new Float32Array(D.n);
  for (let i = 0; i < D.n; i++) {
    px[i] = PAD + D.xy[2 * i] * (W - 2 * PAD);
    py[i] = H - PAD - D.xy[2 * i + 1] * (H - 2 * PAD);
  }
  let colours = pointColours();

  function draw() {
    ctx.clearRect(0, 0, W, H);
    const sel = state.selected ? new Set(state.selected) : null;
    ctx.globalAlpha = sel ? 0.25 : 0.85;
    for (let i = 0; i < D.n; i++) {
      if (sel && sel.has(i)) continue;
      ctx.fillStyle = colours[i];
      ctx.fillRect(px[i] - R, py[i] - R, 2 * R, 2 * R);
    }
    ctx.globalAlpha = 1;
    if (sel) for (const i of sel) {
      ctx.fillStyle = colours[i];
      ctx.fillRect(px[i] - R, py[i] - R, 2 * R, 2 * R);
    }
    for (const [i, colour, r] of [[state.hover, "#555", 6], [state.clicked, "#000", 8]]) {
      if (i < 0) continue;
      ctx.strokeStyle = colour; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.arc(px[i], py[i], r, 0, 2 * Math.PI); ctx.stroke();
    }
    const d = state.drag;
    if (d && d.path.length > 1) {
      ctx.strokeStyle = "#1565c0"; ctx.lineWidth = 1; ctx.setLineDash([4, 3]);
      ctx.beginPath();
      if (state.mode === "box") {
        const [a, b] = [d.path[0], d.path[d.path.length - 1]];
        ctx.rect(a[0], a[1], b[0] - a[0], b[1] - a[1]);
      } else {
        ctx.moveTo(...d.path[0]);
        for (const p of d.path) ctx.lineTo(...p);
        ctx.closePath();
      }
      ctx.stroke(); ctx.setLineDash([]);
    }
  }

  function legend() {
    const L = D.labels[state.label];
    if (L.kind === "num") {
      $("lc-legend").innerHTML = `${escapeText(state.label)}: <span class="sw" style="background:${numColour(0)}">` +
        `</span>${L.lo.toFixed(3)} … <span class="sw" style="background:${numColour(1)}"></span>${L.hi.toFixed(3)}`;
      return;
    }
    const shown = L.names.slice(0, 24).map((name, i) =>
      `<span class="sw" style="background:${catColour(i, L.names.length)}"></span>${escapeText(name)}`);
    const more = L.names.length > 24 ? ` … and ${L.names.length - 24} more` : "";
    $("lc-legend").innerHTML = `${escapeText(state.label)}:` + shown.join("") + more;
  }

  function nearest(x, y) {
    let best = -1, bestD = 64; // within 8 px
    for (let i = 0; i < D.n; i++) {
      const dx = px[i] - x, dy = py[i] - y, dd = dx * dx + dy * dy;
      if (dd < bestD) { bestD = dd; best = i; }
    }
    return best;
  }
  function local(event) {
    const box = canvas.getBoundingClientRect();
    return [(event.clientX - box.left) * W / box.width, (event.clientY - box.top) * H / box.height];
  }

  // --- the linked views ----------------------------------------------------------------------------------
  function rowCaption(i) {
    const parts = [`row ${i}`, D.split[i]];
    for (const name of [D.default_label, state.label]) {
      if (!name || name === "split") continue;
      const L = D.labels[name];
      const value = L.kind === "cat" ? L.names[L.index[i]] : L.values[i].toFixed(3);
      parts.push(`${name}: ${value}`);
    }
    return [...new Set(parts)].map(escapeText).join(" · ");
  }
  function showInstance(i) {
    const box = $("lc-instance");
    if (i < 0) {
      box.innerHTML = "<i>hover a point to see its instance</i>"; box.dataset.row = ""; return;
    }
    box.innerHTML = `<div class="lc-caption">${rowCaption(i)}</div>` + pictures[D.picture_index[i]];
    box.dataset.row = String(i);
  }

  function showPattern(i) {
    const box = $("lc-pattern");
    const [nh, nq, nk] = D.code_shape;
    const view = D.view[i], query = D.query[view], key = D.key[view];
    let htmlText = `<div class="lc-caption"><b>row ${i}</b> · layer ${D.layer} · query position ${query.join(", ")} ·` +
      ` key positions ${key.join(", ")}</div><div>per-head code at the site (head × query × key)</div>` +
      '<canvas id="lc-code"></canvas>';
    htmlText += pattern ? `<div style="margin-top:6px">attention pattern, layer ${D.layer}: head × query × every key` +
      " (site keys outlined in red)</div><canvas id=\"lc-attn\"></canvas>"
      : "<div style=\"margin-top:6px;color:#888\">no attention pattern: these codes came without their model; " +
        "pass the run (lc.explore(run)) to see it</div>";
    box.innerHTML = htmlText;
    box.dataset.row = String(i);
    // the code: heads as rows, (query, key) pairs as columns, each cell with its value
    const cw = 44, ch = 16, left = 34;
    const cc = $("lc-code");
    cc.width = (left + nq * nk * cw) * dpr; cc.height = (nh * ch + 16) * dpr;
    cc.style.width = `${left + nq * nk * cw}px`; cc.style.height = `${nh * ch + 16}px`;
    const g = cc.getContext("2d"); g.scale(dpr, dpr); g.font = "10px sans-serif";
    const base = i * nh * nq * nk;
    let lo = Infinity, hi = -Infinity;
    for (let j = 0; j < nh * nq * nk; j++) { lo = Math.min(lo, codes[base + j]); hi = Math.max(hi, codes[base + j]); }
    g.fillStyle = "#333";
    for (let q = 0; q < nq; q++) for (let k = 0; k < nk; k++) g.fillText(`${query[q]}→${key[k]}`, left + (q * nk + k) * cw + 4, 11);
    for (let h = 0; h < nh; h++) {
      g.fillStyle = "#333"; g.fillText(`h${h}`, 4, 16 + h * ch + 12);
      for (let j = 0; j < nq * nk; j++) {
        const v = codes[base + h * nq * nk + j];
        g.fillStyle = heat(v, Math.min(lo, 0), hi);
        g.fillRect(left + j * cw, 16 + h * ch, cw - 1, ch - 1);
        g.fillStyle = "#111"; g.fillText(v.toFixed(2), left + j * cw + 4, 16 + h * ch + 12);
      }
    }
    if (!pattern) return;
    // the pattern: one band of nq rows per head, every key position as a column, the site's keys outlined
    const [ph, pq, pk] = D.pattern.shape;
    const kw = Math.max(4, Math.min(14, Math.floor(520 / pk))), rh = Math.max(3, Math.min(12, Math.floor(260 / (ph * pq))));
    const ac = $("lc-attn"), top = 14, aw = left + pk * kw, ah = top + ph * pq * rh + ph;
    ac.width = aw * dpr; ac.height = ah * dpr; ac.style.width = `${aw}px`; ac.style.height = `${ah}px`;
    const a = ac.getContext("2d"); a.scale(dpr, dpr); a.font = "9px sans-serif";
    a.fillStyle = "#333";
    for (let k = 0; k < pk; k += Math.max(1, Math.ceil(pk / 12))) a.fillText(String(k), left + k * kw, 10);
    for (let h = 0; h < ph; h++) {
      const lo2 = low[i * ph + h], hi2 = high[i * ph + h];
      const y0 = top + h * (pq * rh + 1);
      a.fillStyle = "#333"; a.fillText(`h${h}`, 4, y0 + Math.min(9, pq * rh));
      for (let q = 0; q < pq; q++) for (let k = 0; k < pk; k++) {
        const j = ((i * ph + h) * pq + q) * pk + k, b = pattern[j >> 1];
        const u = ((j & 1) ? b & 15 : b >> 4) / 15, v = lo2 + u * (hi2 - lo2);
        a.fillStyle = heat(v, Math.min(lo2, 0), Math.max(hi2, 0));
        a.fillRect(left + k * kw, y0 + q * rh, kw, rh);
      }
      a.strokeStyle = "#c62828"; a.lineWidth = 1.2;
      for (const k of key) a.strokeRect(left + k * kw + 0.5, y0 + 0.5, kw - 1, pq * rh - 1);
    }
  }

  function select(rows) {
    state.selected = rows.length ? rows : null;
    const box = $("lc-selection");
    if (!rows.length) { box.innerHTML = "<i>no selection: drag a box or a lasso over the points</i>"; draw(); return; }
    let out = `<b>${rows.length} selected</b>`;
    const names = [...new Set([state.label, D.default_label].filter((n) => n && D.labels[n].kind === "cat"))];
    for (const name of names) {
      const L = D.labels[name], counts = new Map();
      for (const i of rows) counts.set(L.index[i], (counts.get(L.index[i]) || 0) + 1);
      const sorted = [...counts.entries()].sort((p, q) => q[1] - p[1]);
      const purity = sorted[0][1] / rows.length;
      out += `<div>${escapeText(name)}: purity <b class="lc-purity">${(100 * purity).toFixed(1)}%</b> ` +
        `(${sorted.length} distinct)</div><table>` + sorted.slice(0, 12).map(([c, n]) =>
        `<tr><td><span class="sw" style="display:inline-block;width:9px;height:9px;background:` +
        `${catColour(c, L.names.length)}"></span> ${escapeText(L.names[c])}</td><td>${n}</td>` +
        `<td>${(100 * n / rows.length).toFixed(1)}%</td></tr>`).join("") + "</table>";
    }
    box.innerHTML = out;
    box.dataset.count = String(rows.length);
    draw();
  }
  function inside(poly, x, y) {
    let hit = false;
    for (let a = 0, b = poly.length - 1; a < poly.length; b = a++) {
      const [xa, ya] = poly[a], [xb, yb] = poly[b];
      if ((ya > y) !== (yb > y) && x < ((xb - xa) * (y - ya)) / (yb - ya) + xa) hit = !hit;
    }
    return hit;
  }
  function finishDrag(path) {
    const rows = [];
    if (state.mode === "box") {
      const [a, b] = [path[0], path[path.length - 1]];
      const [x0, x1] = [Math.min(a[0], b[0]), Math.max(a[0], b[0])], [y0, y1] = [Math.min(a[1], b[1]), Math.max(a[1], b[1])];
      for (let i = 0; i < D.n; i++) if (px[i] >= x0 && px[i] <= x1 && py[i] >= y0 && py[i] <= y1) rows.push(i);
    } else {
      for (let i = 0; i < D.n; i++) if (inside(path, px[i], py[i])) rows.push(i);
    }
    select(rows);
  }

  function hover(i) {
    if (!pictures) return;
    state.hover = i; showInstance(i >= 0 ? i : state.clicked); draw(); }
  function click(i) {
    if (i < 0 || !pictures) return;
    state.clicked = i; showInstance(i); showPattern(i); draw();
  }

  canvas.addEventListener("mousedown", (e) => { state.drag = { path: [local(e)] }; });
  canvas.addEventListener("mousemove", (e) => {
    const p = local(e);
    if (state.drag) { state.drag.path.push(p); draw(); return; }
    const i = nearest(...p);
    if (i !== state.hover) hover(i);
  });
  canvas.addEventListener("mouseup", (e) => {
    const d = state.drag; state.drag = null;
    const p = local(e);
    if (!d) return;
    const moved = Math.hypot(p[0] - d.path[0][0], p[1] - d.path[0][1]);
    if (moved < 4) click(nearest(...p)); else { d.path.push(p); finishDrag(d.path); }
  });
  canvas.addEventListener("mouseleave", () => { state.drag = null; hover(-1); });
  $("lc-box").onclick = () => { state.mode = "box"; $("lc-box").className = "on"; $("lc-lasso").className = ""; };
  $("lc-lasso").onclick = () => { state.mode = "lasso"; $("lc-lasso").className = "on"; $("lc-box").className = ""; };
  $("lc-clear").onclick = () => select([]);
  const menu = $("lc-colour");
  for (const name of Object.keys(D.labels)) {
    const o = document.createElement("option"); o.value = name; o.textContent = name; menu.appendChild(o);
  }
  menu.value = state.label;
  menu.onchange = () => {
    state.label = menu.value; colours = pointColours(); legend();
    if (state.selected) select(state.selected); else draw();
  };
  $("lc-reading").textContent = `${D.method.toUpperCase()} of the codes · ${D.reading}`;

  window.lcExplorer = {
    state,
    // the point's centre in viewport coordinates (for tests and scripted tours)
    pointClient(i) {
      const box = canvas.getBoundingClientRect();
      return { x: box.left + px[i] * box.width / W, y: box.top + py[i] * box.height / H };
    },
    hover, click, select,
  };
  legend();
  draw();
  Promise.all([unpack(D.pictures), unpack(D.codes),
    D.pattern ? unpack(D.pattern.data) : null, D.pattern ? unpack(D.pattern.low) : null,
    D.pattern ? unpack(D.pattern.high) : null]).then(([pics, c, p, lo, hi]) => {
    pictures = JSON.parse(new TextDecoder().decode(pics));
    codes = new Float32Array(c);
    if (p) { pattern = new Uint8Array(p); low = new Float32Array(lo); high = new Float32Array(hi); }
    window.lcExplorer.readyMs = performance.now();  // since navigation started
    root.dataset.ready = "1";
  }).catch((err) => { root.dataset.ready = "error"; console.error("latent-code explorer: " + err); });
})();
