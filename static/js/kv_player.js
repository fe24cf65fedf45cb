/* The KV-pool player: every scheduler's pool painted on its own canvas (kv_paint.js), played as an animation
   whose moment moves the time cursor on the timelines (timeline.js). Painting a frame is a few thousand
   fillRects (about a millisecond), so playback runs at PLAY_FPS however many schedulers are compared. The grid
   (columns, rows) is the same for all: equal cells. */
import { EMBED, embedScale } from "./slides.js";
import { DARK, DARK_MODE } from "./theme.js";
import { cellStates, paintFrame, stateOf } from "./kv_paint.js";
import { downloadKv } from "./kv_download.js";
import { highlightRow, moveCursors, rememberParam, rememberTime } from "./timeline.js";

var PLAY_FPS = 30; // at speed 1 (the speed control multiplies it)
var kvSpeed = 1; // the speed chosen last: a new run's player keeps it
var MAX_CELL_PX = 14;
var MIN_SIDE_BY_SIDE_PX = 4;
var MAX_GRID_PX = 300; // the tallest a grid may get: the landing view keeps it above the fold
var KV_CAPTION_PX = 26; // a grid's caption line above it

// The players on the page, in the order their figures were drawn; the first one's moment is the page's.
export const players = [];

// Stop and forget the players inside `root` (htmx is about to replace it).
export function releasePlayers(root) {
  var kept = players.filter(function (p) {
    if (root.contains(p.div)) { p.stop(); return false; }
    return true;
  });
  players.length = 0;
  Array.prototype.push.apply(players, kept);
}

// Show moment t (seconds) on the page: the first player's, or, with none, just the cursors.
export function seekPlayers(t) {
  if (players.length) players[0].seek(t); else moveCursors(t);
}

export class KvPlayer {
  // `spec`: the view's states and grid (figures/kv.py); `frames`: each scheduler's frames, recorded by the run.
  constructor(div, spec, frames) {
    var self = this;
    this.div = div;
    this.states = {};
    spec.states.forEach(function (st) { self.states[st.key] = st; });
    this.lightFree = this.states.free.colors;
    this.theme(DARK_MODE.matches);
    this.index = 0;
    this.timer = null;
    this.bindControls(document.querySelector('[data-kv-controls="' + div.id + '"]'));
    this.tip = document.createElement("div");
    this.tip.className = "kv-tip";
    this.tip.hidden = true;
    this.build(spec, frames);
    this.ready = this.open(frames);
  }

  bindControls(controls) {
    var self = this;
    this.playButton = controls && controls.querySelector("[data-play]");
    this.scrub = controls && controls.querySelector("[data-scrub]");
    this.label = controls && controls.querySelector("[data-clock]");
    // Playback speed: frames per second are PLAY_FPS times the choice; a change while playing takes effect at once.
    this.speedSelect = controls && controls.querySelector("[data-speed]");
    this.speed = kvSpeed;
    if (this.speedSelect) {
      this.speedSelect.value = String(kvSpeed);
      if (+this.speedSelect.value !== kvSpeed) this.speed = +this.speedSelect.value || 1; // not one offered
      this.speedSelect.addEventListener("change", function () {
        self.speed = kvSpeed = +self.speedSelect.value || 1;
        if (self.timer) self.run();
      });
    }
    // A cluster's KV view shows one engine's pool, picked in this list (absent for one engine).
    this.engine = controls && controls.querySelector("[data-kv-engine]");
    this.engineSeq = 0;
    if (this.engine) this.engine.addEventListener("change", function () { self.pickEngine(self.engine.value, true); });
    if (this.playButton) this.playButton.addEventListener("click", function () { self.toggle(); });
    if (this.scrub) {
      this.scrub.addEventListener("input", function () { self.stop(); self.show(+self.scrub.value); });
      this.scrub.addEventListener("change", function () { rememberTime(self.timeAt(self.index)); });
    }
  }

  // The first frame shown: a shared link's moment (t=) and engine (engine=), else the busiest moment, reached by
  // playing from the start unless the reader asked for less motion. Resolves once that frame is painted.
  open(frames) {
    var params = new URLSearchParams(window.location.search);
    var shared = parseFloat(params.get("t"));
    var busiest = Math.min(this.steps - 1, frames.start || 0);
    this.show(isFinite(shared) ? this.indexAt(shared) : busiest);
    if (this.engine) {
      this.div.dataset.engine = this.engine.dataset.default;
      var wanted = params.get("engine"), listed = Array.prototype.some.call(this.engine.options, function (o) {
        return o.value === wanted;
      });
      if (wanted && listed && wanted !== this.engine.dataset.default) {
        this.engine.value = wanted;
        return this.pickEngine(wanted, false, isFinite(shared) ? shared : null);
      }
    }
    var still = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    if (!isFinite(shared) && !still && busiest > 0) {
      this.show(0);
      this.play(busiest, false);
    }
    return Promise.resolve();
  }

  // A canvas (and caption) per scheduler's pool in `frames` on the grid of `spec`.
  build(spec, frames) {
    var self = this, withSwap = frames.schedulers.some(function (x) { return x.swap; });
    this.spec = frames;
    this.grid = spec.grid;
    this.steps = Math.max(1, frames.steps);
    this.div.textContent = "";
    this.panels = frames.schedulers.map(function (s) { return self.makePanel(s, withSwap); });
    this.tip.hidden = true;
    this.div.appendChild(this.tip);
    if (this.scrub) this.scrub.max = String(this.steps - 1);
    this.layout();
  }

  // One pool's figure: its caption, its grid's canvas, the host swap strip (`withSwap`: any pool swaps) and the
  // lower KV tiers' bars.
  makePanel(s, withSwap) {
    var self = this, panel = document.createElement("figure");
    panel.className = "kv-panel";
    panel.dataset.scheduler = s.name;
    var usage = document.createElement("span");
    panel.appendChild(makeCaption(s, panel, usage));
    var canvas = document.createElement("canvas");
    // The caption names the pool and says its use at this moment; the grid itself is a picture of it.
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", "KV cache blocks of " + s.name + (s.engine ? " on " + s.engine : "") + ", coloured by state");
    panel.appendChild(canvas);
    this.div.appendChild(panel);
    var p = { s: s, panel: panel, canvas: canvas, usage: usage, frame: -1, firstToken: s.first_token_s || {},
              highlight: null, cellStates: {} };
    if (withSwap) { // host swap space: a strip under the grid
      p.swapCanvas = document.createElement("canvas");
      p.swapCanvas.className = "kv-swap";
      p.swapCanvas.setAttribute("aria-label", "host swap space");
      panel.appendChild(p.swapCanvas);
    }
    if (s.tiers) p.tierBars = this.makeTierBars(s.tiers, panel);
    canvas.addEventListener("mousemove", function (e) { self.hover(p, e); });
    canvas.addEventListener("mouseleave", function () { self.tip.hidden = true; highlightRow(s.name, null); });
    return p;
  }

  // KV offload: one bar per lower tier (host memory, disk), its use at this frame, and the run's totals.
  makeTierBars(tiers, panel) {
    var self = this;
    var bars = tiers.tiers.map(function (tier) {
      var row = document.createElement("div"), bar = document.createElement("span"), fill = document.createElement("span");
      var text = document.createElement("span");
      row.className = "kv-tier";
      row.dataset.tier = tier.key;
      bar.className = "kv-tier-bar";
      fill.style.background = self.states.cached.colors[0]; // what a tier keeps: cached prefix blocks
      bar.appendChild(fill);
      row.appendChild(bar);
      row.appendChild(text);
      panel.appendChild(row);
      return { tier: tier, row: row, fill: fill, text: text };
    });
    var note = document.createElement("p");
    note.className = "kv-tier-caption";
    note.textContent = tiers.caption;
    panel.appendChild(note);
    return bars;
  }

  // Show engine `name`'s pool (a cluster), fetched from the server's cached run, at the moment shown now (or at
  // `at`, seconds: a shared link's); `remember`: write the choice into the URL (engine=), as a person's pick.
  pickEngine(name, remember, at) {
    var self = this, seq = ++this.engineSeq, select = this.engine;
    var t = typeof at === "number" ? at : this.timeAt(this.index);
    this.stop();
    this.div.dataset.engineLoading = name;
    var url = "/kv/engine?" + select.dataset.kvQuery + "&engine=" + encodeURIComponent(name);
    return fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error((body.detail && body.detail[0] && body.detail[0].msg) || body.detail || r.status);
          return body;
        });
      })
      .then(function (body) {
        if (seq !== self.engineSeq) return; // a later pick superseded this one
        self.build(body.kv, body.frames);
        self.div.dataset.engine = name;
        delete self.div.dataset.engineLoading;
        self.show(self.indexAt(t));
        if (remember) rememberParam("engine", encodeURIComponent(name));
      })
      .catch(function (err) {
        if (seq !== self.engineSeq) return;
        delete self.div.dataset.engineLoading;
        select.value = self.div.dataset.engine;
        if (self.label) self.label.textContent = "could not load " + name + ": " + err.message;
      });
  }

  // In dark mode a free cell is a faint square on the dark card, not a bright one.
  theme(dark) {
    var free = dark ? [DARK.freeCell, DARK.freeCell] : this.lightFree;
    this.states.free = Object.assign({}, this.states.free, { colors: free });
    var swatch = document.querySelector('.kv-legend [data-state="free"]');
    if (swatch) { swatch.style.setProperty("--c", free[0]); swatch.style.setProperty("--c2", free[1]); }
    this.panels && this.panels.forEach(function (p) { p.frame = -1; }); // repainted by the next show()
  }

  layout() {
    var cols = this.grid.cols, rows = this.grid.rows, full = this.div.clientWidth;
    // side by side when each grid still gets cells of MIN_SIDE_BY_SIDE_PX; stacked (a phone) otherwise
    var n = this.panels.length;
    while (n > 1 && (full - 16 * (n - 1)) / n / cols < MIN_SIDE_BY_SIDE_PX) n--;
    var width = Math.max(60, (full - 16 * (n - 1)) / n);
    // in an embed, the grids get the height the frame leaves them (less their captions), however small
    var tallest = EMBED ? Math.max(rows, this.div.clientHeight - KV_CAPTION_PX * embedScale()) : MAX_GRID_PX;
    var cell = Math.max(1, Math.min(MAX_CELL_PX, Math.floor(width / cols), Math.floor(tallest / rows)));
    var dpr = window.devicePixelRatio || 1;
    this.cell = cell;
    this.gap = cell >= 5 ? 1 : 0; // a gutter between cells where they are big enough to afford one
    this.panels.forEach(function (p) {
      sizeCanvas(p.canvas, cols * cell, rows * cell, dpr);
      p.ctx = p.canvas.getContext("2d");
      p.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      if (p.swapCanvas) {
        sizeCanvas(p.swapCanvas, cols * cell, Math.max(4, cell), dpr);
        p.swapCtx = p.swapCanvas.getContext("2d");
        p.swapCtx.setTransform(dpr, 0, 0, dpr, 0, 0);
      }
      p.frame = -1; // repaint on the next show()
    });
  }

  timeAt(j) {
    return this.steps > 1 ? this.spec.horizon * j / (this.steps - 1) : 0;
  }

  indexAt(t) {
    if (!(this.spec.horizon > 0)) return 0;
    return Math.max(0, Math.min(this.steps - 1, Math.round(t / this.spec.horizon * (this.steps - 1))));
  }

  // The last recorded frame of scheduler `s` at or before t (binary search on its instants).
  frameAt(s, t) {
    var times = s.frame_s, lo = 0, hi = times.length - 1;
    if (hi < 0) return -1;
    if (t < times[0]) return 0;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (times[mid] <= t + 1e-9) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  paint(p, f) {
    paintFrame(this, p, f);
  }

  // Light up one request's blocks in a scheduler's grid (null: all of them again).
  highlight(scheduler, owner) {
    var p = this.panels.filter(function (q) { return q.s.name === scheduler; })[0];
    if (!p || p.highlight === owner) return;
    p.highlight = owner;
    if (owner === null) delete p.panel.dataset.highlight; else p.panel.dataset.highlight = String(owner);
    if (p.frame >= 0) this.paint(p, p.frame);
  }

  show(j) {
    this.index = j;
    var t = this.timeAt(j), self = this;
    this.panels.forEach(function (p) {
      var f = self.frameAt(p.s, t);
      if (f < 0) return;
      if (f !== p.frame) {
        self.paint(p, f);
        p.frame = f;
      }
      var pct = p.s.usage.length ? (100 * p.s.usage[f]).toFixed(0) : "0";
      p.usage.textContent = " " + pct + "% of " + p.s.blocks.toLocaleString("en-US") + " blocks in use" + (p.swapText || "");
    });
    if (this.scrub) this.scrub.value = String(j);
    if (this.label) this.label.textContent = "t = " + t.toFixed(2) + " s";
    this.div.dataset.frame = String(j);
    this.div.dataset.time = t.toFixed(4); // the simulated time of the frame just painted
    moveCursors(t);
  }

  seek(t) {
    this.stop();
    this.show(this.indexAt(t));
    rememberTime(this.timeAt(this.index));
  }

  // The tooltip over the cell under the pointer: which blocks, whose, in which state.
  hover(p, e) {
    var rect = p.canvas.getBoundingClientRect(), cols = this.grid.cols;
    var col = Math.floor((e.clientX - rect.left) / this.cell), row = Math.floor((e.clientY - rect.top) / this.cell);
    var c = row * cols + col, runs = p.s.runs[p.frame];
    if (col < 0 || col >= cols || row < 0 || c >= p.s.cells || !runs) { this.tip.hidden = true; return; }
    var code = 0;
    for (var i = 0, at = 0; i < runs.length; at += runs[i + 1], i += 2) {
      if (c < at + runs[i + 1]) { code = runs[i]; break; }
    }
    var k = p.s.k, owner = Math.floor(code / (k + 1)) - 1, used = code % (k + 1), st = cellStates(p, p.frame)[c];
    var first = c * k, last = Math.min(p.s.blocks, first + k) - 1;
    var where = k > 1 ? "blocks " + first + "–" + last : "block " + first;
    highlightRow(p.s.name, owner < 0 ? null : owner);
    var label = stateOf(this, p, owner, p.s.frame_s[p.frame], st).label;
    this.tip.textContent = owner < 0 ? where + ": " + label : where + ": request #" + owner + ", "
      + label + (k > 1 ? " (" + used + "/" + (last - first + 1) + " in use)" : "");
    var box = this.div.getBoundingClientRect();
    this.tip.style.left = (e.clientX - box.left + 12) + "px";
    this.tip.style.top = (e.clientY - box.top + 12) + "px";
    this.tip.hidden = false;
  }

  toggle() {
    if (this.timer) { this.stop(); rememberTime(this.timeAt(this.index)); return; }
    this.play(this.steps - 1, true);
  }

  // Play up to frame `until`; `remember`: write where it stops into the URL (what a person played, not autoplay).
  play(until, remember) {
    this.stop();
    if (this.index >= until) this.show(0);
    this.until = until;
    this.remember = remember;
    this.run();
    if (this.playButton) { this.playButton.textContent = "❚❚ Pause"; this.playButton.setAttribute("aria-label", "Pause"); }
  }

  // (Re)start the frame timer at the current speed, towards this.until; data-frame-ms says its period.
  run() {
    var self = this, ms = 1000 / (PLAY_FPS * this.speed);
    if (this.timer) clearInterval(this.timer);
    this.div.dataset.frameMs = ms.toFixed(2);
    this.timer = setInterval(function () {
      if (self.index >= self.until) {
        self.stop();
        if (self.remember) rememberTime(self.timeAt(self.index));
        return;
      }
      self.show(self.index + 1);
    }, ms);
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.playButton) { this.playButton.textContent = "▶ Play"; this.playButton.setAttribute("aria-label", "Play the animation"); }
  }

  download(filename, choice, info) {
    downloadKv(this.panels, filename, choice, info);
  }
}

// The caption over a pool's grid: the scheduler's name in its text shade (charts.text_style: 4.5:1 where the
// plot colour is not), a cluster's engine, then `usage` (show() writes the pool's use at the moment shown).
function makeCaption(s, panel, usage) {
  var caption = document.createElement("figcaption");
  var name = document.createElement("b");
  name.textContent = s.name;
  name.className = "sched-text";
  name.style.cssText = s.text_style || "color: " + s.color;
  caption.appendChild(name);
  if (s.engine) { // a cluster: which engine's pool this is
    var engine = document.createElement("span");
    engine.className = "kv-engine-name";
    engine.textContent = " · " + s.engine;
    caption.appendChild(engine);
    panel.dataset.engine = s.engine;
  }
  caption.appendChild(usage);
  return caption;
}

// A canvas `width` x `height` CSS pixels, its bitmap at the screen's device pixel ratio.
function sizeCanvas(canvas, width, height, dpr) {
  canvas.style.width = width + "px";
  canvas.style.height = height + "px";
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
}
