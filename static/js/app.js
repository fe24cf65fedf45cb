/* sched-sim dashboard: draws the server-built plotly figures, plays the KV pools on canvases (moving the time
   cursor on the timelines with it; a click on a time axis seeks it), exports figures, copies links. Figures arrive as JSON in
   <script type="application/json" data-figure-for="plot-id"> next to their <div>; htmx.onLoad draws every
   new one, on the first page load and after each swap. */
(function () {
  "use strict";

  var PLOT_CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
    // plotly's "Share chart..." uploads to a Plotly Cloud server this app has none of: a button that did nothing.
    // A figure is shared by its card's Embed link (and the page's Copy link).
    showSendToCloud: false,
  };
  var PLOTLY_SRC = document.currentScript.dataset.plotly;
  var plotlyReady = window.Plotly ? Promise.resolve() : new Promise(function (resolve, reject) {
    function load() {
      var script = document.createElement("script");
      script.src = PLOTLY_SRC;
      script.onload = resolve;
      script.onerror = reject;
      document.head.appendChild(script);
    }
    requestAnimationFrame(function () { setTimeout(load, 0); }); // after the first paint
  });
  var players = [];
  var EMBED = document.body.classList.contains("embed"); // one figure alone in a frame: it fits the frame
  var cursorTime = null; // the KV animation's simulated time, shown on every [data-cursor] figure

  function figureConfig(div) {
    var cfg = Object.assign({}, PLOT_CONFIG);
    cfg.toImageButtonOptions = { format: "png", scale: 2, filename: "sched-sim-" + (div.dataset.figure || "figure") };
    return cfg;
  }

  // Figures are drawn when they come near the viewport, and the rest one by one when the browser is idle:
  // plotly needs ~0.1-0.3 s per figure on a slow machine, and the metrics table should not wait for them.
  var observer = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) draw(e.target); });
    }, { rootMargin: "400px 0px" })
    : null;
  var idleQueued = false;

  function figureScript(div) {
    return document.querySelector('script[data-figure-for="' + div.id + '"]');
  }

  function draw(div) {
    if (div.dataset.drawn) return div.dataset.drawn === "1" ? Promise.resolve() : div._drawing;
    if (!figureScript(div)) return Promise.resolve();
    if (observer) observer.unobserve(div);
    div.dataset.drawn = "pending";
    // the KV view paints canvases itself: it need not wait for plotly.js to load
    var kv = document.querySelector('script[data-kv-frames-for="' + div.id + '"]');
    div._drawing = (kv ? Promise.resolve() : plotlyReady).then(function () { return drawNow(div); });
    return div._drawing;
  }

  // ----- dark mode: the page follows prefers-color-scheme (app.css); plotly figures get dark colours here -----
  var DARK_MODE = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : { matches: false };
  var DARK = { paper: "#161b22", ink: "#c9d1d9", grid: "#262c34", minor: "#1d232b", line: "#6e7681", freeCell: "#2d333b" };
  var LIGHT = { paper: "#ffffff", ink: "#495057", grid: "#e9ecef", minor: "#f3f4f6", line: "#adb5bd" };

  function axisKeys(layout) {
    return Object.keys(layout).filter(function (k) { return /^[xy]axis\d*$/.test(k); });
  }

  // A note in a colour of its own (a knee's label in its scheduler's text shade, charts.text_colors) is chosen to
  // read on the light paper; on the dark one (1.5-3.2:1 there) it is lightened just enough to read at 4.5:1, and
  // back on the light one darkened again if it must. Colours other than #rrggbb are left as they are.
  function readable(c, theme) {
    function rgb(h) { return [1, 3, 5].map(function (i) { return parseInt(h.slice(i, i + 2), 16); }); }
    function lum(v) {
      var l = v.map(function (x) { x /= 255; return x <= 0.04045 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
      return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
    }
    if (!/^#[0-9a-f]{6}$/i.test(c || "")) return c;
    var from = rgb(c), ground = lum(rgb(theme.paper)), toward = theme === DARK ? 255 : 0;
    for (var step = 0; step <= 100; step++) {
      var m = from.map(function (x) { return Math.round(x + (toward - x) * step / 100); });
      var a = lum(m), ratio = (Math.max(a, ground) + 0.05) / (Math.min(a, ground) + 0.05);
      if (ratio >= 4.5) return "#" + m.map(function (x) { return (x < 16 ? "0" : "") + x.toString(16); }).join("");
    }
    return c;
  }

  // The figure's colours for one theme (the server draws figures light; a download is always light). Notes and
  // lines in the ink's colour (reference lines: SLO targets) take the theme's ink; a note on a ground of its own
  // (a knee's label) gets the theme's paper, a little translucent.
  function themeColors(layout, theme) {
    var paper = [1, 3, 5].map(function (i) { return parseInt(theme.paper.slice(i, i + 2), 16); });
    function ink(c) { return c === LIGHT.ink || c === DARK.ink ? theme.ink : readable(c, theme); }
    var out = {
      paper_bgcolor: theme.paper, plot_bgcolor: theme.paper,
      font: Object.assign({}, layout.font, { color: theme.ink }),
    };
    if (layout.annotations) {
      out.annotations = layout.annotations.map(function (a) {
        var b = Object.assign({}, a);
        if (a.font && a.font.color) b.font = Object.assign({}, a.font, { color: ink(a.font.color) });
        if (a.bgcolor) b.bgcolor = "rgba(" + paper.join(",") + ",0.85)";
        return b;
      });
    }
    if (layout.shapes) {
      out.shapes = layout.shapes.map(function (s) {
        return s.line && s.line.color ? Object.assign({}, s, { line: Object.assign({}, s.line, { color: ink(s.line.color) }) }) : s;
      });
    }
    axisKeys(layout).forEach(function (k) {
      var ax = layout[k], minor = ax.minor ? { minor: Object.assign({}, ax.minor, { gridcolor: theme.minor }) } : {};
      var named = ax.title && ax.title.font && ax.title.font.color; // a cluster row's title in its engine's colour
      var title = named ? { title: Object.assign({}, ax.title, { font: Object.assign({}, ax.title.font, { color: readable(named, theme) }) }) } : {};
      out[k] = Object.assign({}, ax, { gridcolor: theme.grid, linecolor: theme.line, tickcolor: theme.line }, minor, title);
    });
    return out;
  }


  // Side-by-side panels (the latency distributions, the goodput curves) are stacked on a narrow screen, where
  // three of them would each get a hundred pixels and overprint their labels: each x axis spans the width and
  // each y axis gets its own band; the lines and notes of a panel move with it.
  var STACK_BELOW_PX = 640;
  var STACKED_PANEL_PX = 240;

  function stackPanels(layout, width) {
    var xs = axisKeys(layout).filter(function (k) { return k[0] === "x"; });
    var sideBySide = xs.some(function (k) { return layout[k].domain && layout[k].domain[0] > 0.01; });
    if (width >= STACK_BELOW_PX || xs.length < 2 || !sideBySide) return false;
    var n = xs.length, gap = 0.36 / n, band = (1 - gap * (n - 1)) / n;
    xs.forEach(function (xk, i) {
      var top = 1 - i * (band + gap);
      layout[xk].domain = [0, 1];
      layout["y" + xk.slice(1)].domain = [Math.max(0, top - band), top];
    });
    function panelY(xref) { return "y" + xref.split(" ")[0].slice(1) + " domain"; }
    (layout.shapes || []).concat(layout.annotations || []).forEach(function (item) {
      if (item.yref === "paper" && item.xref && /^x\d*( domain)?$/.test(item.xref)) item.yref = panelY(item.xref);
    });
    layout.height = n * STACKED_PANEL_PX + (layout.margin ? layout.margin.t + layout.margin.b : 100);
    return true;
  }

  // ----- slides: text, lines and markers grow with the frame or the export -----
  // The server draws figures for a card about 960 px wide with 12 px text. A 1920x1080 slide would shrink that text
  // to 1% of its height, unreadable across a room: an embed's figure, and an export at a fixed size, scale every
  // font, line width, marker and margin by how much larger than SLIDE_PX the frame (or the image) is.
  var SLIDE_PX = [960, 540];

  function slideScale(width, height) {
    return Math.max(1, Math.min(width / SLIDE_PX[0], height / SLIDE_PX[1]));
  }

  // A copy of a figure's objects (a trace's data arrays are shared: they are never scaled), safe to scale.
  function copyStyle(o) {
    if (Array.isArray(o)) return o.length && o[0] !== null && typeof o[0] === "object" ? o.map(copyStyle) : o;
    if (!o || typeof o !== "object") return o;
    var out = {};
    Object.keys(o).forEach(function (k) { out[k] = copyStyle(o[k]); });
    return out;
  }

  // Which numbers are lengths in pixels, by their key and the key of the object holding them.
  function isPixels(key, holder) {
    if (key === "size") return /font$/i.test(holder) || holder === "marker";
    if (key === "width") return holder === "line";
    if (holder === "margin") return true;
    return /^(ticklen|tickwidth|linewidth|gridwidth|xshift|yshift|borderpad|borderwidth|standoff)$/.test(key);
  }

  // Scale a figure's (copied) data and layout by k, in place. An axis' most ticks shrink as its labels grow; a
  // trace whose line width is a row's thickness (meta "rows", charts.ROW_BARS) keeps it: it fits the plot's height.
  function scaleFigure(data, layout, k) {
    if (k === 1) return;
    function walk(o, holder) {
      if (Array.isArray(o)) { o.forEach(function (x) { if (x && typeof x === "object") walk(x, holder); }); return; }
      Object.keys(o).forEach(function (key) {
        var v = o[key];
        if (typeof v === "number" && key === "nticks") o[key] = Math.max(2, Math.round(v / k));
        else if (typeof v === "number" && isPixels(key, holder)) o[key] = Math.round(v * k * 100) / 100;
        else if (v && typeof v === "object") walk(v, key);
      });
    }
    layout.font = Object.assign({ size: 12 }, layout.font);
    walk(layout, "layout");
    data.forEach(function (trace) {
      var rows = trace.meta === "rows" && trace.line ? trace.line.width : null;
      walk(trace, "trace");
      if (rows !== null) trace.line.width = rows;
    });
  }

  // The size an embed shows its figure at: the frame's (or the width and height its query asked for).
  function embedScale() {
    var main = document.querySelector(".embed-main");
    return main ? slideScale(main.clientWidth, main.clientHeight) : 1;
  }

  function drawNow(div) {
    var script = figureScript(div);
    if (!script || !document.body.contains(div)) return null;
    var fig = JSON.parse(script.textContent);
    div._export = fig.export || null; // what an export of it says beside the plot (exportSpec)
    if (DARK_MODE.matches && fig.layout) Object.assign(fig.layout, themeColors(fig.layout, DARK));
    var frames = document.querySelector('script[data-kv-frames-for="' + div.id + '"]');
    var done;
    if (frames) {
      var player = new KvPlayer(div, fig, JSON.parse(frames.textContent));
      players.push(player);
      done = player.ready;
    } else {
      // autosize measures the container on every relayout: pin its height, or a redraw collapses it. An embed's
      // plot instead takes the height its frame leaves it (app.css), and plotly sizes itself to that.
      if (!EMBED && stackPanels(fig.layout, div.clientWidth)) div.dataset.stacked = "";
      if (EMBED) {
        delete fig.layout.height;
        div._scale = embedScale();
        scaleFigure(fig.data, fig.layout, div._scale);
      } else if (fig.layout.height) div.style.height = fig.layout.height + "px";
      done = Plotly.newPlot(div, fig.data, fig.layout, figureConfig(div)).then(function () {
        untabModeBar(div);
        div.on("plotly_afterplot", function () { untabModeBar(div); });
        if (div.dataset.figure === "gantt") {
          // hovering a request's row lights up its blocks in the KV view
          div.on("plotly_hover", function (e) {
            var y = e.points && e.points[0] && e.points[0].y;
            if (players.length && typeof y === "number") players[0].highlight(div.dataset.scheduler, y);
          });
          div.on("plotly_unhover", function () {
            if (players.length) players[0].highlight(div.dataset.scheduler, null);
          });
        }
        if (!div.hasAttribute("data-cursor")) return;
        div.on("plotly_afterplot", function () { if (cursorTime !== null) placeCursor(div, cursorTime); });
        if (cursorTime !== null) placeCursor(div, cursorTime);
      });
    }
    return done.then(function () { div.dataset.drawn = "1"; });
  }

  // Plotly's mode-bar buttons (zoom, pan, download...) are mouse tools: out of the Tab order, or each figure would
  // add half a dozen stops before the next card; its card's PNG/SVG/Embed buttons are the keyboard's. Plotly
  // rebuilds the mode bar on some redraws, so this runs after each.
  function untabModeBar(div) {
    div.querySelectorAll(".modebar-btn").forEach(function (b) { b.setAttribute("tabindex", "-1"); });
  }

  function drawWhenIdle() {
    if (idleQueued) return;
    idleQueued = true;
    var idle = window.requestIdleCallback || function (fn) { return setTimeout(fn, 150); };
    idle(function step() {
      var next = document.querySelector(".plot[data-figure]:not([data-drawn])");
      if (!next) { idleQueued = false; return; }
      draw(next).then(function () { idle(step); }, function (err) { console.error(err); idle(step); });
    });
  }

  // The system switching between light and dark recolours what is already drawn.
  if (DARK_MODE.addEventListener) {
    DARK_MODE.addEventListener("change", function () {
      var theme = DARK_MODE.matches ? DARK : LIGHT;
      players.forEach(function (p) { p.theme(DARK_MODE.matches); p.show(p.index); });
      if (!window.Plotly) return;
      document.querySelectorAll('.js-plotly-plot[data-drawn="1"]').forEach(function (div) {
        Plotly.relayout(div, themeColors(div.layout, theme));
      });
    });
  }

  function drawFigures(root) {
    var scripts = root.querySelectorAll("script[data-figure-for]");
    for (var i = 0; i < scripts.length; i++) {
      var div = document.getElementById(scripts[i].dataset.figureFor);
      if (!div || div.dataset.drawn) continue;
      if (observer) observer.observe(div); else draw(div);
    }
    plotlyReady.then(drawWhenIdle);
  }

  // ----- KV-pool player: every scheduler's pool painted on its own canvas -----
  // Painting a frame is a few thousand fillRects (about a millisecond), so playback runs at PLAY_FPS however
  // many schedulers are compared. The grid (columns, rows) is the same for all: equal cells.
  var PLAY_FPS = 30; // at speed 1 (the speed control multiplies it)
  var kvSpeed = 1; // the speed chosen last: a new run's player keeps it
  var MAX_CELL_PX = 14;
  var MIN_SIDE_BY_SIDE_PX = 4;
  var MAX_GRID_PX = 300; // the tallest a grid may get: the landing view keeps it above the fold
  var KV_CAPTION_PX = 26; // a grid's caption line above it

  function KvPlayer(div, spec, frames) {
    this.div = div;
    this.states = {};
    var self = this;
    spec.states.forEach(function (st) { self.states[st.key] = st; });
    this.lightFree = this.states.free.colors;
    this.theme(DARK_MODE.matches);
    this.index = 0;
    this.timer = null;
    var controls = document.querySelector('[data-kv-controls="' + div.id + '"]');
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
    this.tip = document.createElement("div");
    this.tip.className = "kv-tip";
    this.tip.hidden = true;
    this.build(spec, frames);
    if (this.playButton) this.playButton.addEventListener("click", function () { self.toggle(); });
    if (this.scrub) {
      this.scrub.addEventListener("input", function () { self.stop(); self.show(+self.scrub.value); });
      this.scrub.addEventListener("change", function () { rememberTime(self.timeAt(self.index)); });
    }
    var params = new URLSearchParams(window.location.search);
    var shared = parseFloat(params.get("t"));
    var busiest = Math.min(this.steps - 1, frames.start || 0);
    this.show(isFinite(shared) ? this.indexAt(shared) : busiest);
    this.ready = Promise.resolve();
    if (this.engine) {
      div.dataset.engine = this.engine.dataset.default;
      this.engine.addEventListener("change", function () { self.pickEngine(self.engine.value, true); });
      // A shared link's engine (engine=) opens that engine's pool, at the link's moment.
      var wanted = params.get("engine"), listed = Array.prototype.some.call(this.engine.options, function (o) {
        return o.value === wanted;
      });
      if (wanted && listed && wanted !== this.engine.dataset.default) {
        this.engine.value = wanted;
        this.ready = this.pickEngine(wanted, false, isFinite(shared) ? shared : null);
        return;
      }
    }
    // Without a shared moment, it plays by itself from the start up to the busiest moment and rests there.
    var still = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    if (!isFinite(shared) && !still && busiest > 0) {
      this.show(0);
      this.play(busiest, false);
    }
  }

  // A canvas (and caption) per scheduler's pool in `frames` on the grid of `spec`.
  KvPlayer.prototype.build = function (spec, frames) {
    var self = this;
    this.spec = frames;
    this.grid = spec.grid;
    this.steps = Math.max(1, frames.steps);
    this.div.textContent = "";
    this.panels = frames.schedulers.map(function (s) {
      var panel = document.createElement("figure");
      panel.className = "kv-panel";
      panel.dataset.scheduler = s.name;
      var caption = document.createElement("figcaption");
      var name = document.createElement("b");
      name.textContent = s.name;
      // its name in the scheduler's text shade (charts.text_style: 4.5:1 where the plot colour is not)
      name.className = "sched-text";
      name.style.cssText = s.text_style || "color: " + s.color;
      var usage = document.createElement("span");
      caption.appendChild(name);
      if (s.engine) { // a cluster: which engine's pool this is
        var engine = document.createElement("span");
        engine.className = "kv-engine-name";
        engine.textContent = " · " + s.engine;
        caption.appendChild(engine);
        panel.dataset.engine = s.engine;
      }
      caption.appendChild(usage);
      var canvas = document.createElement("canvas");
      // The caption names the pool and says its use at this moment; the grid itself is a picture of it.
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", "KV cache blocks of " + s.name + (s.engine ? " on " + s.engine : "") + ", coloured by state");
      panel.appendChild(caption);
      panel.appendChild(canvas);
      self.div.appendChild(panel);
      var p = { s: s, panel: panel, canvas: canvas, usage: usage, frame: -1, firstToken: s.first_token_s || {},
                highlight: null, cellStates: {} };
      if (frames.schedulers.some(function (x) { return x.swap; })) { // host swap space: a strip under the grid
        p.swapCanvas = document.createElement("canvas");
        p.swapCanvas.className = "kv-swap";
        p.swapCanvas.setAttribute("aria-label", "host swap space");
        panel.appendChild(p.swapCanvas);
      }
      if (s.tiers) { // KV offload: one bar per lower tier (host memory, disk), its use at this frame, and the run's totals
        p.tierBars = s.tiers.tiers.map(function (tier) {
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
        note.textContent = s.tiers.caption;
        panel.appendChild(note);
      }
      canvas.addEventListener("mousemove", function (e) { self.hover(p, e); });
      canvas.addEventListener("mouseleave", function () { self.tip.hidden = true; highlightRow(s.name, null); });
      return p;
    });
    this.tip.hidden = true;
    this.div.appendChild(this.tip);
    if (this.scrub) this.scrub.max = String(this.steps - 1);
    this.layout();
  };

  // Show engine `name`'s pool (a cluster), fetched from the server's cached run, at the moment shown now (or at
  // `at`, seconds: a shared link's); `remember`: write the choice into the URL (engine=), as a person's pick.
  KvPlayer.prototype.pickEngine = function (name, remember, at) {
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
  };

  // In dark mode a free cell is a faint square on the dark card, not a bright one.
  KvPlayer.prototype.theme = function (dark) {
    var free = dark ? [DARK.freeCell, DARK.freeCell] : this.lightFree;
    this.states.free = Object.assign({}, this.states.free, { colors: free });
    var swatch = document.querySelector('.kv-legend [data-state="free"]');
    if (swatch) { swatch.style.setProperty("--c", free[0]); swatch.style.setProperty("--c2", free[1]); }
    this.panels && this.panels.forEach(function (p) { p.frame = -1; }); // repainted by the next show()
  };

  KvPlayer.prototype.layout = function () {
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
      p.canvas.style.width = cols * cell + "px";
      p.canvas.style.height = rows * cell + "px";
      p.canvas.width = Math.round(cols * cell * dpr);
      p.canvas.height = Math.round(rows * cell * dpr);
      p.ctx = p.canvas.getContext("2d");
      p.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      if (p.swapCanvas) {
        var high = Math.max(4, cell);
        p.swapCanvas.style.width = cols * cell + "px";
        p.swapCanvas.style.height = high + "px";
        p.swapCanvas.width = Math.round(cols * cell * dpr);
        p.swapCanvas.height = Math.round(high * dpr);
        p.swapCtx = p.swapCanvas.getContext("2d");
        p.swapCtx.setTransform(dpr, 0, 0, dpr, 0, 0);
      }
      p.frame = -1; // repaint on the next show()
    });
  };

  KvPlayer.prototype.timeAt = function (j) {
    return this.steps > 1 ? this.spec.horizon * j / (this.steps - 1) : 0;
  };

  KvPlayer.prototype.indexAt = function (t) {
    if (!(this.spec.horizon > 0)) return 0;
    return Math.max(0, Math.min(this.steps - 1, Math.round(t / this.spec.horizon * (this.steps - 1))));
  };

  KvPlayer.prototype.frameAt = function (s, t) {
    // the last recorded frame at or before t (binary search on its instants)
    var times = s.frame_s, lo = 0, hi = times.length - 1;
    if (hi < 0) return -1;
    if (t < times[0]) return 0;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (times[mid] <= t + 1e-9) lo = mid; else hi = mid - 1;
    }
    return lo;
  };

  // Each cell's CELL_* state in frame f (app/kvstates.py: 0 plain, 1 shared prefix, 2 cached and evictable, 3 held
  // by no running request: a prefill engine's KV waiting for its transfer).
  KvPlayer.prototype.cellStates = function (p, f) {
    if (p.cellStates[f]) return p.cellStates[f];
    var out = new Int8Array(p.s.cells), runs = (p.s.states || [])[f] || [];
    for (var i = 0, c = 0; i < runs.length; i += 2) out.fill(runs[i], c, (c += runs[i + 1]));
    return (p.cellStates[f] = out);
  };

  KvPlayer.prototype.stateOf = function (p, owner, t, cellState) {
    if (cellState === 2) return this.states.cached;
    if (cellState === 3 && this.states.held) return this.states.held;
    if (owner < 0) return this.states.free;
    if (cellState === 1) return this.states.shared;
    var first = p.firstToken[owner];
    return first === null || first === undefined || t < first ? this.states.prefill : this.states.decode;
  };

  KvPlayer.prototype.paint = function (p, f) {
    var s = p.s, ctx = p.ctx, cell = this.cell, side = cell - this.gap, cols = this.grid.cols, K = s.k + 1;
    var t = s.frame_s[f], runs = s.runs[f] || [], c = 0, cs = this.cellStates(p, f), used = 0;
    ctx.clearRect(0, 0, cols * cell, this.grid.rows * cell);
    for (var i = 0; i < runs.length; i += 2) {
      var owner = Math.floor(runs[i] / K) - 1, len = runs[i + 1];
      used += (runs[i] % K) * len;
      ctx.globalAlpha = p.highlight === null || owner === p.highlight ? 1 : 0.2; // a hovered Gantt row's blocks stand out
      for (var n = 0; n < len; n++, c++) {
        ctx.fillStyle = this.stateOf(p, owner, t, cs[c]).colors[owner < 0 ? 0 : owner & 1];
        ctx.fillRect((c % cols) * cell, Math.floor(c / cols) * cell, side, side);
      }
    }
    ctx.globalAlpha = 1;
    // What the grid shows, for whoever reads the page: the frame's instant and the blocks requests hold in it.
    p.panel.dataset.frameTime = String(t);
    p.panel.dataset.used = String(used);
    this.paintSwap(p, f);
    this.paintTiers(p, f);
  };

  // The lower KV tiers under the grid: how much of each one's capacity holds blocks at frame f.
  KvPlayer.prototype.paintTiers = function (p, f) {
    (p.tierBars || []).forEach(function (b) {
      var t = b.tier, held = t.frames[f] || 0, gb = function (blocks) { return String(Number((blocks * t.block_gb).toPrecision(3))); };
      b.fill.style.width = (100 * held / Math.max(1, t.capacity)).toFixed(2) + "%";
      b.row.dataset.blocks = String(held);
      b.text.textContent = t.label + " " + gb(held) + " of " + gb(t.capacity) + " GB (" + held.toLocaleString("en-US") +
        " of " + t.capacity.toLocaleString("en-US") + " blocks)";
    });
  };

  // Host swap space under the grid: its share in use, in the swapped-out colour (one row of cells).
  KvPlayer.prototype.paintSwap = function (p, f) {
    if (!p.swapCtx) return;
    var cols = this.grid.cols, cell = this.cell, side = cell - this.gap, high = Math.max(4, cell) - this.gap;
    var row = (p.s.swap && p.s.swap.frames[f]) || [], used = 0, requests = row.length / 2;
    for (var i = 1; i < row.length; i += 2) used += row[i];
    var capacity = (p.s.swap && p.s.swap.capacity) || 1, filled = used ? Math.max(1, Math.ceil(used / capacity * cols)) : 0;
    p.swapCtx.clearRect(0, 0, cols * cell, high + this.gap);
    for (var c = 0; c < cols; c++) {
      p.swapCtx.fillStyle = c < filled ? this.states.swapped.colors[0] : this.states.free.colors[0];
      p.swapCtx.fillRect(c * cell, 0, side, high);
    }
    p.panel.dataset.swapped = String(used);
    p.swapText = used ? " · " + used.toLocaleString("en-US") + " blocks of " + requests + " request" +
      (requests === 1 ? "" : "s") + " swapped out to host" : " · host swap space empty";
  };

  // Light up one request's blocks in a scheduler's grid (null: all of them again).
  KvPlayer.prototype.highlight = function (scheduler, owner) {
    var p = this.panels.filter(function (q) { return q.s.name === scheduler; })[0];
    if (!p || p.highlight === owner) return;
    p.highlight = owner;
    if (owner === null) delete p.panel.dataset.highlight; else p.panel.dataset.highlight = String(owner);
    if (p.frame >= 0) this.paint(p, p.frame);
  };

  KvPlayer.prototype.show = function (j) {
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
  };

  KvPlayer.prototype.seek = function (t) {
    this.stop();
    this.show(this.indexAt(t));
    rememberTime(this.timeAt(this.index));
  };

  KvPlayer.prototype.hover = function (p, e) {
    var rect = p.canvas.getBoundingClientRect(), cols = this.grid.cols;
    var col = Math.floor((e.clientX - rect.left) / this.cell), row = Math.floor((e.clientY - rect.top) / this.cell);
    var c = row * cols + col, runs = p.s.runs[p.frame];
    if (col < 0 || col >= cols || row < 0 || c >= p.s.cells || !runs) { this.tip.hidden = true; return; }
    var code = 0;
    for (var i = 0, at = 0; i < runs.length; at += runs[i + 1], i += 2) {
      if (c < at + runs[i + 1]) { code = runs[i]; break; }
    }
    var k = p.s.k, owner = Math.floor(code / (k + 1)) - 1, used = code % (k + 1), st = this.cellStates(p, p.frame)[c];
    var first = c * k, last = Math.min(p.s.blocks, first + k) - 1;
    var where = k > 1 ? "blocks " + first + "–" + last : "block " + first;
    highlightRow(p.s.name, owner < 0 ? null : owner);
    var label = this.stateOf(p, owner, p.s.frame_s[p.frame], st).label;
    this.tip.textContent = owner < 0 ? where + ": " + label : where + ": request #" + owner + ", "
      + label + (k > 1 ? " (" + used + "/" + (last - first + 1) + " in use)" : "");
    var box = this.div.getBoundingClientRect();
    this.tip.style.left = (e.clientX - box.left + 12) + "px";
    this.tip.style.top = (e.clientY - box.top + 12) + "px";
    this.tip.hidden = false;
  };

  KvPlayer.prototype.toggle = function () {
    if (this.timer) { this.stop(); rememberTime(this.timeAt(this.index)); return; }
    this.play(this.steps - 1, true);
  };

  // Play up to frame `until`; `remember`: write where it stops into the URL (what a person played, not autoplay).
  KvPlayer.prototype.play = function (until, remember) {
    this.stop();
    if (this.index >= until) this.show(0);
    this.until = until;
    this.remember = remember;
    this.run();
    if (this.playButton) { this.playButton.textContent = "❚❚ Pause"; this.playButton.setAttribute("aria-label", "Pause"); }
  };

  // (Re)start the frame timer at the current speed, towards this.until; data-frame-ms says its period.
  KvPlayer.prototype.run = function () {
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
  };

  KvPlayer.prototype.stop = function () {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.playButton) { this.playButton.textContent = "▶ Play"; this.playButton.setAttribute("aria-label", "Play the animation"); }
  };

  KvPlayer.prototype.download = function (filename, choice, info) {
    // The grids side by side under their captions: at twice their on-screen size, or scaled to fit the chosen
    // slide size (centred, cells kept square and sharp); the figure's title above them, the scenario's caption
    // and the runs' warnings under them (exportText).
    var pad = 16, w = pad, h = 0, dpr = window.devicePixelRatio || 1;
    this.panels.forEach(function (p) { w += p.canvas.width / dpr + pad; h = Math.max(h, p.canvas.height / dpr); });
    w = Math.max(w, 480); // room for the caption's lines
    var text = exportText(info || {}, Math.floor((w - 2 * pad) / (0.56 * 11)));
    var top = text.title ? 26 : 0, head = top + 28, notes = text.caption.concat(text.warnings);
    var foot = notes.length ? notes.length * 15 + 8 : 0;
    h += head + pad + foot;
    var out = document.createElement("canvas");
    var scale = choice.width ? Math.min(choice.width / w, choice.height / h) : 2;
    out.width = choice.width || Math.round(w * scale);
    out.height = choice.height || Math.round(h * scale);
    var ctx = out.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    if (!choice.transparent) {
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, out.width, out.height);
    }
    ctx.translate((out.width - w * scale) / 2, (out.height - h * scale) / 2);
    ctx.scale(scale, scale);
    if (text.title) {
      ctx.font = "bold 15px system-ui, sans-serif";
      ctx.fillStyle = EXPORT_INK;
      ctx.fillText(text.title, pad, 20);
    }
    ctx.font = "11px system-ui, sans-serif";
    notes.forEach(function (line, i) {
      ctx.fillStyle = i < text.caption.length ? EXPORT_NOTE : EXPORT_WARNING;
      ctx.fillText(line, pad, h - foot + 12 + i * 15);
    });
    ctx.font = "13px system-ui, sans-serif";
    var x = pad;
    this.panels.forEach(function (p) {
      ctx.fillStyle = p.s.color;
      ctx.fillText(p.s.name + (p.s.engine ? " · " + p.s.engine : "") + p.usage.textContent, x, top + 20);
      ctx.drawImage(p.canvas, x, head, p.canvas.width / dpr, p.canvas.height / dpr);
      x += p.canvas.width / dpr + pad;
    });
    var link = document.createElement("a");
    link.href = out.toDataURL("image/png");
    link.download = "sched-sim-" + filename + ".png";
    document.body.appendChild(link);
    link.click();
    document.body.removeChild(link);
  };

  // The playback time is part of the page's URL (t=, seconds), so a shared link opens on the same frame. The
  // rest of the query stays as the server wrote it.
  function rememberTime(t) { rememberParam("t", t.toFixed(2)); }

  // A view parameter (t, engine: already URL-encoded) written into the page's URL in place of its old value.
  function rememberParam(key, value) {
    var kept = window.location.search.replace(/^\?/, "").split("&").filter(function (p) {
      return p && p.split("=")[0] !== key;
    });
    kept.push(key + "=" + value);
    history.replaceState(history.state, "", window.location.pathname + "?" + kept.join("&"));
  }

  // A band across the Gantt row of the request under the pointer in the KV view (none if the Gantt shows a
  // sample of requests without it).
  function highlightRow(scheduler, id) {
    var div = document.getElementById("plot-gantt-" + scheduler), full = div && div._fullLayout;
    if (!full) return;
    var band = div.querySelector(":scope > .row-highlight");
    if (!div._rowIds) {
      div._rowIds = {};
      div.data.forEach(function (trace) { trace.y.forEach(function (y) { if (y !== null) div._rowIds[y] = true; }); });
    }
    if (id === null || !div._rowIds[id]) {
      if (band) band.hidden = true;
      delete div.dataset.highlight;
      return;
    }
    if (!band) {
      band = document.createElement("div");
      band.className = "row-highlight";
      div.appendChild(band);
    }
    var xa = full.xaxis, ya = full.yaxis, y = ya._offset + ya.l2p(id);
    band.style.left = xa._offset + "px";
    band.style.width = xa._length + "px";
    band.style.top = y - 4 + "px";
    band.hidden = y < ya._offset || y > ya._offset + ya._length;
    div.dataset.highlight = String(id);
  }

  // ----- the time cursor over every figure with a time axis ([data-cursor]) -----
  function placeCursor(div, t) {
    var full = div._fullLayout, xa = full && full.xaxis;
    if (!xa || !xa._length) return;
    var line = div.querySelector(":scope > .time-cursor");
    if (!line) {
      line = document.createElement("div");
      line.className = "time-cursor";
      div.appendChild(line);
    }
    var x = xa._offset + xa.l2p(t);
    line.style.left = x + "px";
    line.style.top = full._size.t + "px";
    line.style.height = full._size.h + "px";
    line.hidden = x < xa._offset - 1 || x > xa._offset + xa._length + 1; // zoomed away from it
    div.dataset.cursorTime = t.toFixed(4);
  }

  function moveCursors(t) {
    cursorTime = t;
    var divs = document.querySelectorAll("[data-cursor]");
    for (var i = 0; i < divs.length; i++) placeCursor(divs[i], t); // plotted ones; the others when drawn
  }

  // A click (not a drag, which zooms) on a time axis' plot area seeks the KV view to that moment.
  var pressed = null;
  document.addEventListener("mousedown", function (e) {
    var plot = e.target.closest && e.target.closest("[data-cursor]");
    pressed = plot && e.target.closest(".nsewdrag") ? { plot: plot, x: e.clientX, y: e.clientY } : null;
  }, true);
  document.addEventListener("mouseup", function (e) {
    var p = pressed;
    pressed = null;
    if (!p || Math.abs(e.clientX - p.x) > 3 || Math.abs(e.clientY - p.y) > 3) return;
    var xa = p.plot._fullLayout && p.plot._fullLayout.xaxis;
    if (!xa) return;
    var t = xa.p2l(p.x - p.plot.getBoundingClientRect().left - xa._offset);
    if (players.length) players[0].seek(t); else moveCursors(t);
  }, true);

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      players.forEach(function (p) { p.layout(); p.show(p.index); });
      if (EMBED) rescaleEmbed();
    }, 150);
  });

  // An embed's frame resized (a slide shown full screen): its figures are drawn again at the new scale, and the
  // metrics table fitted again.
  function rescaleEmbed() {
    fitEmbed();
    if (!window.Plotly) return;
    var k = embedScale();
    document.querySelectorAll('.js-plotly-plot[data-drawn="1"]').forEach(function (div) {
      if (div._scale === k || !figureScript(div)) return;
      var fig = JSON.parse(figureScript(div).textContent);
      if (DARK_MODE.matches) Object.assign(fig.layout, themeColors(fig.layout, DARK));
      delete fig.layout.height;
      scaleFigure(fig.data, fig.layout, k);
      div._scale = k;
      Plotly.react(div, fig.data, fig.layout, figureConfig(div));
    });
  }

  // An embed's text (caption, card heads) grows with the frame as its figure does. The metrics table, a table and
  // no figure, is laid out to fill the frame without scrolling inside it: its row groups flowed into 1 to
  // MAX_TABLE_COLUMNS columns (each a table under the same header), at the largest zoom at which they fit, the
  // number of columns that allows the largest.
  var MAX_TABLE_COLUMNS = 4, MIN_TABLE_ZOOM = 0.05, MAX_TABLE_ZOOM = 4;

  function fitEmbed() {
    if (!EMBED) return;
    document.documentElement.style.setProperty("--slide-scale", String(embedScale()));
    var card = document.querySelector(".embed-main > #card-metrics");
    var grid = card && card.querySelector(".metrics-grid");
    if (!grid) return;
    // The note under the table (its clairvoyant bound) is zoomed with it: unscaled, it took a quarter of a
    // 480x270 frame from the table, and read smaller than the table in a 1080p one.
    var note = card.querySelector(".bounds-note");
    function zoomTo(z) { grid.style.zoom = String(z); if (note) note.style.zoom = String(z); }
    if (!grid._groups) {
      grid._groups = Array.prototype.slice.call(grid.querySelectorAll("table.metrics > tbody"));
      grid._head = grid.querySelector("table.metrics > thead");
    }
    function flow(n) { // the groups in order, in n columns of about as many rows each
      var total = 0;
      grid._groups.forEach(function (g) { total += g.rows.length; });
      grid.textContent = "";
      grid.style.gridTemplateColumns = "repeat(" + n + ", minmax(max-content, 1fr))";
      var table = null, rows = 0, made = 0;
      grid._groups.forEach(function (g) {
        if (!table || (rows + g.rows.length / 2 > total * made / n && made < n)) {
          var wrap = document.createElement("div");
          wrap.className = "table-wrap";
          table = document.createElement("table");
          table.className = "metrics";
          table.appendChild(grid._head.cloneNode(true));
          wrap.appendChild(table);
          grid.appendChild(wrap);
          made++;
        }
        table.appendChild(g);
        rows += g.rows.length;
      });
    }
    function fits() {
      var wraps = grid.querySelectorAll(".table-wrap");
      for (var i = 0; i < wraps.length; i++) if (wraps[i].scrollWidth > wraps[i].clientWidth) return false;
      return card.scrollHeight <= card.clientHeight && card.scrollWidth <= card.clientWidth;
    }
    function largestZoom() { // 0: none fits
      zoomTo(MIN_TABLE_ZOOM);
      if (!fits()) return 0;
      var lo = MIN_TABLE_ZOOM, hi = MAX_TABLE_ZOOM;
      for (var i = 0; i < 12; i++) {
        var mid = (lo + hi) / 2;
        zoomTo(mid);
        if (fits()) lo = mid; else hi = mid;
      }
      return lo;
    }
    var best = { n: 2, zoom: 0 };
    for (var n = 1; n <= Math.min(MAX_TABLE_COLUMNS, grid._groups.length); n++) {
      flow(n);
      var zoom = largestZoom();
      if (zoom > best.zoom * 1.02) best = { n: n, zoom: zoom }; // more columns only for a larger table
    }
    flow(best.n);
    zoomTo(best.zoom || MIN_TABLE_ZOOM);
    grid.dataset.columns = String(best.n);
  }

  // ----- present mode (an embed's present=1): the figure fills the window; the arrow keys (or Page Up and
  // Down, as a presenter's clicker sends) step to the previous or next figure of the same scenario, Esc goes back
  // to the dashboard -----
  function presentStep(delta) {
    var main = document.querySelector(".embed-main");
    var names = main ? (main.dataset.embedFigures || "").split(",").filter(Boolean) : [];
    var at = names.indexOf(main && main.dataset.embedFigure);
    if (at < 0) return;
    window.location.href = "/embed/" + encodeURIComponent(names[(at + delta + names.length) % names.length]) +
      window.location.search;
  }

  if (EMBED && document.body.classList.contains("present")) {
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey || (e.target.closest && e.target.closest("input, select, textarea"))) return;
      var step = { ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1 }[e.key];
      if (step) { e.preventDefault(); presentStep(step); return; }
      var back = document.getElementById("open-link");
      if (e.key === "Escape" && back) window.location.href = back.href;
    });
  }

  // ----- clean up before htmx replaces figures -----
  function release(root) {
    players = players.filter(function (p) {
      if (root.contains(p.div)) { p.stop(); return false; }
      return true;
    });
    if (!window.Plotly) return;
    var plots = root.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < plots.length; i++) Plotly.purge(plots[i]);
  }

  // ----- the metric glossary: a tap (or a click, or Enter) on a metric's name shows what it measures -----
  // The description is the row's title (the metric catalogue's), which only a mouse could hover.
  function toggleGlossary(term) {
    var cell = term.closest("th"), help = cell.querySelector(".term-help");
    if (!help) {
      help = document.createElement("span");
      help.className = "term-help";
      help.textContent = cell.title;
      help.hidden = true;
      cell.appendChild(help);
    }
    help.hidden = !help.hidden;
    term.setAttribute("aria-expanded", help.hidden ? "false" : "true");
  }

  // ----- buttons -----
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function flash(button, text) {
    var old = button.dataset.label || button.textContent;
    button.dataset.label = old;
    button.textContent = text;
    setTimeout(function () { button.textContent = old; }, 1600);
  }

  // ----- exports: the size and background chosen above the results (kept across runs), else as on screen -----
  var exportChoice = { size: "", background: "white" };

  function exportOptions() {
    var wh = exportChoice.size ? exportChoice.size.split("x") : [];
    return { width: wh.length ? +wh[0] : 0, height: wh.length ? +wh[1] : 0,
             transparent: exportChoice.background === "transparent" };
  }

  function showExportChoice(root) {
    if (!root.querySelectorAll) return;
    root.querySelectorAll("[data-export-size]").forEach(function (s) { s.value = exportChoice.size; });
    root.querySelectorAll("[data-export-background]").forEach(function (s) { s.value = exportChoice.background; });
  }

  document.addEventListener("change", function (e) {
    if (e.target.matches("[data-export-size]")) exportChoice.size = e.target.value;
    if (e.target.matches("[data-export-background]")) exportChoice.background = e.target.value;
  });

  var EXPORT_INK = "#212529", EXPORT_NOTE = "#495057", EXPORT_WARNING = "#8a4b00";

  function escapeText(t) {
    return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // Words into lines of at most `chars` characters.
  function wrapText(text, chars) {
    var lines = [], line = "";
    String(text).split(/\s+/).forEach(function (word) {
      if (line && (line + " " + word).length > chars) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    });
    if (line) lines.push(line);
    return lines;
  }

  // What an exported image says beside its plot (the server's `export` of the figure: title, the scenario's
  // caption, the runs' warnings), as lines of at most `chars` characters: [title, caption lines, warning lines].
  function exportText(info, chars) {
    var caption = info.caption ? wrapText(info.caption, chars) : [];
    var warnings = [];
    (info.warnings || []).forEach(function (w) { warnings = warnings.concat(wrapText("⚠ " + w, chars)); });
    return { title: info.title || "", caption: caption, warnings: warnings };
  }

  // The figure an export draws, at `width` x `height` pixels: the plot in light colours (on white or nothing),
  // scaled for that size (slideScale), with the figure's title above it and the scenario's caption and warnings
  // in a footer under it, so the file tells what it shows wherever it is pasted.
  function exportSpec(gd, info, width, height, transparent) {
    // Panels stacked for a narrow screen (stackPanels) go back side by side: a slide is wide.
    var script = gd.hasAttribute("data-stacked") && figureScript(gd);
    var source = script ? JSON.parse(script.textContent) : { data: gd.data, layout: gd.layout };
    var data = copyStyle(source.data);
    var layout = copyStyle(Object.assign({}, source.layout, themeColors(source.layout, LIGHT)));
    layout.paper_bgcolor = layout.plot_bgcolor = transparent ? "rgba(0,0,0,0)" : "#ffffff";
    delete layout.width;
    delete layout.height;
    var k = slideScale(width, height);
    scaleFigure(data, layout, k);
    if (!info) return { data: data, layout: layout, scale: k, added: 0 };
    var margin = Object.assign({ l: 80, r: 80, t: 100, b: 80 }, layout.margin), added = 0;
    var titleSize = Math.round(15 * k), noteSize = Math.round(11 * k), pad = Math.round(10 * k);
    var text = exportText(info, Math.max(30, Math.floor((width - 2 * pad) / (0.56 * noteSize))));
    if (text.title) {
      layout.title = { text: "<b>" + escapeText(text.title) + "</b>", font: { size: titleSize, color: EXPORT_INK },
                       x: 0, xref: "container", xanchor: "left", y: 1, yref: "container", yanchor: "top",
                       pad: { l: pad, t: pad } };
      added += Math.round(titleSize * 1.6);
      margin.t += Math.round(titleSize * 1.6);
    }
    var lines = text.caption.map(escapeText).concat(text.warnings.map(function (w) {
      return "<span style='color:" + EXPORT_WARNING + "'>" + escapeText(w) + "</span>";
    }));
    if (lines.length) {
      layout.annotations = (layout.annotations || []).concat([{
        text: lines.join("<br>"), xref: "paper", yref: "paper", x: 0, y: 0, xanchor: "left", yanchor: "top",
        xshift: pad - margin.l, yshift: -margin.b, align: "left", showarrow: false,
        font: { size: noteSize, color: EXPORT_NOTE }, name: "export-caption",
      }]);
      added += Math.round(lines.length * noteSize * 1.35 + pad);
      margin.b += Math.round(lines.length * noteSize * 1.35 + pad);
    }
    layout.margin = margin;
    return { data: data, layout: layout, scale: k, added: added };
  }

  function exportFigure(gd, format, filename) {
    var choice = exportOptions();
    // A figure of its own for the file: a fixed size is the image's size in pixels (scale 1), the on-screen
    // size is doubled for PNG; the background is white or none, and the colours are the light theme's.
    var width = choice.width || gd.offsetWidth, height = choice.height || gd.offsetHeight;
    var spec = exportSpec(gd, gd._export, width, height, choice.transparent);
    // At the on-screen size the image grows by the title and footer, so the plot keeps its size; a chosen slide
    // size is kept, and the plot shares it with them.
    if (!choice.width) height += spec.added;
    return Plotly.downloadImage({ data: spec.data, layout: spec.layout }, {
      format: format, filename: "sched-sim-" + filename, width: width, height: height,
      scale: format === "png" && !choice.width ? 2 : 1,
    });
  }

  document.addEventListener("click", function (e) {
    var exp = e.target.closest("[data-export]");
    if (exp) {
      var gd = document.getElementById(exp.dataset.target);
      if (!gd) return;
      var name = exp.dataset.filename || gd.dataset.figure;
      var player = players.filter(function (p) { return p.div === gd; })[0];
      if (player) { player.download(name, exportOptions(), gd._export); return; }
      draw(gd).then(function () { return exportFigure(gd, exp.dataset.export, name); });
      return;
    }
    var term = e.target.closest(".metrics .term");
    if (term) { toggleGlossary(term); return; }
    var copy = e.target.closest("[data-copy-link]");
    if (copy) {
      copyText(window.location.href).then(function () { flash(copy, "Link copied ✓"); },
        function () { window.prompt("Copy this link:", window.location.href); });
      return;
    }
    var clear = e.target.closest("[data-clear-trace]");
    if (clear) {
      var status = document.getElementById("trace-status");
      if (status) status.innerHTML = "";
      var file = document.getElementById("f-trace");
      if (file) file.value = "";
      htmx.trigger("#scenario-form", "submit");
    }
  });

  // ----- the model picker: each model's badges, and an uploaded config.json in place of a catalogue model -----
  // The uploaded model is the picker's selected entry (value "": no catalogue model) while the hidden model_file
  // input in #model-config-status names it; picking a catalogue model drops the upload, as Remove does.
  function showBadges(select) {
    var box = document.getElementById("model-badges");
    var opt = select.options[select.selectedIndex];
    if (!box) return;
    var list = [];
    try { list = opt && opt.dataset.badges ? JSON.parse(opt.dataset.badges) : []; } catch (err) { list = []; }
    box.textContent = "";
    list.forEach(function (b) {
      var span = document.createElement("span");
      span.className = "badge badge-" + b.kind;
      span.title = b.title;
      span.textContent = b.label;
      box.appendChild(span);
    });
  }

  function dropModelConfig(select) {
    var status = document.getElementById("model-config-status");
    if (status) status.innerHTML = "";
    var file = document.getElementById("f-model-config");
    if (file) file.value = "";
    var uploaded = select.querySelector("option[data-uploaded]");
    if (uploaded) select.removeChild(uploaded);
  }

  // Capture phase: the upload goes before the form's own change handler sends the scenario (model and model_file
  // together would be refused).
  document.addEventListener("change", function (e) {
    var select = e.target.closest && e.target.closest("[data-model-picker]");
    if (!select) return;
    var opt = select.options[select.selectedIndex];
    if (!opt || !opt.hasAttribute("data-uploaded")) {
      var value = select.value;
      dropModelConfig(select);
      select.value = value;
    }
    showBadges(select);
  }, true);

  document.addEventListener("click", function (e) {
    if (!e.target.closest("[data-clear-model-config]")) return;
    var select = document.querySelector("[data-model-picker]");
    if (!select) return;
    dropModelConfig(select);
    select.value = "";
    showBadges(select);
    htmx.trigger("#scenario-form", "submit");
  });

  function fromModelUpload(e) {
    var elt = e.detail && e.detail.requestConfig && e.detail.requestConfig.elt;
    return !!elt && elt.id === "f-model-config";
  }

  // A file the simulator cannot read leaves the model in use as it was; only its error is shown.
  document.body.addEventListener("htmx:beforeSwap", function (e) {
    var status = document.getElementById("model-config-status");
    if (!status || !fromModelUpload(e) || e.detail.xhr.status < 400) return;
    e.detail.shouldSwap = false;
    var old = document.getElementById("err-model-config");
    if (old) old.parentNode.removeChild(old);
    var answer = new DOMParser().parseFromString(e.detail.xhr.responseText, "text/html");
    var error = answer.getElementById("err-model-config");
    if (error) status.appendChild(document.importNode(error, true));
  });

  document.body.addEventListener("htmx:afterSettle", function (e) {
    var select = document.querySelector("[data-model-picker]");
    var hidden = document.querySelector("#model-config-status input[name=model_file]");
    if (!fromModelUpload(e) || !select || !hidden) return;
    var opt = select.querySelector("option[data-uploaded]");
    if (!opt) {
      opt = document.createElement("option");
      opt.value = "";
      opt.setAttribute("data-uploaded", "");
      select.appendChild(opt);
    }
    opt.textContent = hidden.dataset.modelName + " (uploaded config.json)";
    opt.dataset.badges = hidden.dataset.badges;
    opt.selected = true;
    showBadges(select);
    htmx.trigger("#scenario-form", "submit");
  });

  // An element marked data-change-stays-here handles its own change event; the form around it must not see it
  // (here, in app.js, not an inline handler: the pages' Content-Security-Policy allows no inline script).
  function keepChangesHere(root) {
    if (!root.querySelectorAll) return;
    var marked = Array.prototype.slice.call(root.querySelectorAll("[data-change-stays-here]"));
    if (root.matches && root.matches("[data-change-stays-here]")) marked.push(root);
    marked.forEach(function (el) {
      el.addEventListener("change", function (e) { e.stopPropagation(); });
    });
  }

  // ----- the scenario form is never redrawn -----
  // An answer to the form carries the whole workspace; only #results swaps (hx-select). What the form shows
  // besides the user's own values (error messages, red borders, placeholders that depend on other fields) is
  // copied from the answer's form into the live one, so nothing typed or ticked meanwhile is lost.
  var COPIED_ATTRIBUTES = ["placeholder", "title", "aria-invalid", "aria-describedby"];

  function ownErrors(el) {
    return Array.prototype.filter.call(el.children, function (c) { return c.classList.contains("field-error"); });
  }

  function syncForm(live, fresh) {
    var slots = fresh.querySelectorAll("[data-field]");
    for (var i = 0; i < slots.length; i++) {
      var f = slots[i], l = live.querySelector('[data-field="' + f.dataset.field + '"]');
      if (!l) continue;
      l.classList.toggle("invalid", f.classList.contains("invalid"));
      var folded = l.closest("details");
      if (folded && f.classList.contains("invalid")) folded.open = true; // an error must not hide in "Advanced"
      ownErrors(l).forEach(function (p) { l.removeChild(p); });
      ownErrors(f).forEach(function (p) { l.appendChild(document.importNode(p, true)); });
      var fc = f.querySelector("input[id^='f-'], select"), lc = fc && l.querySelector("#" + fc.id);
      if (!lc || lc.type === "file") continue;
      COPIED_ATTRIBUTES.forEach(function (name) {
        if (fc.hasAttribute(name)) lc.setAttribute(name, fc.getAttribute(name)); else lc.removeAttribute(name);
      });
      if (lc.tagName === "SELECT" && lc.options.length === fc.options.length) {
        for (var k = 0; k < lc.options.length; k++) {
          if (lc.options[k].value === fc.options[k].value) lc.options[k].textContent = fc.options[k].textContent;
        }
      }
    }
  }

  function showStale(results, freshDoc) {
    results.classList.add("stale");
    var template = freshDoc.getElementById("stale-note-template");
    var old = document.getElementById("stale-note");
    if (old) old.parentNode.removeChild(old);
    if (template) results.insertBefore(document.importNode(template.content, true), results.firstChild);
  }

  document.body.addEventListener("htmx:beforeSwap", function (e) {
    var form = document.getElementById("scenario-form");
    if (!form || e.detail.requestConfig.elt !== form) return;
    var freshDoc = new DOMParser().parseFromString(e.detail.xhr.responseText, "text/html");
    var fresh = freshDoc.getElementById("scenario-form");
    if (fresh) syncForm(form, fresh);
    var results = document.getElementById("results");
    // An invalid field keeps the last good results on screen, dimmed; there is nothing to keep on a page that
    // has none yet.
    if (e.detail.xhr.status === 422 && results && results.querySelector("#card-metrics")) {
      e.detail.shouldSwap = false;
      showStale(results, freshDoc);
    }
  });

  // ----- drawn goodput curves outlive a change of the scenario: kept, marked stale, one click redraws them -----
  // A sweep takes a while; a new scenario's results come without curves (only the range they propose). Curves
  // on screen are lifted out before the swap (release() would purge them) and put in the new card's place for
  // them, under a note saying they are the previous scenario's and a button that sweeps the same rates again.
  var keptCurves = null;
  var SWEEP_PARAMS = ["rate_min", "rate_max", "rate_step"];

  function sweptRates(status) {
    if (status.dataset.rates) return status.dataset.rates.split(",");
    var params = new URLSearchParams(window.location.search); // the page's URL names the sweep drawn
    var rates = SWEEP_PARAMS.map(function (k) { return params.get(k); });
    if (rates.every(function (r) { return r; })) return rates;
    var form = document.getElementById("goodput-form");
    return form ? SWEEP_PARAMS.map(function (k) { return form.elements[k].value; }) : null;
  }

  document.body.addEventListener("htmx:beforeSwap", function (e) {
    var form = document.getElementById("scenario-form");
    if (!form || e.detail.requestConfig.elt !== form || !e.detail.shouldSwap) return;
    var status = document.getElementById("goodput-status");
    if (!status || !status.querySelector("#plot-goodput")) return;
    var rates = sweptRates(status);
    if (!rates) return;
    status.dataset.rates = rates.join(",");
    status.parentNode.removeChild(status);
    keptCurves = status;
  });

  document.body.addEventListener("htmx:afterSwap", function () {
    var kept = keptCurves, fresh = document.getElementById("goodput-status");
    var form = document.getElementById("goodput-form");
    keptCurves = null;
    if (!kept) return;
    if (!fresh || !form || fresh.querySelector("#plot-goodput")) { // curves of their own, or none possible
      if (window.Plotly) kept.querySelectorAll(".js-plotly-plot").forEach(function (d) { Plotly.purge(d); });
      return;
    }
    var rates = kept.dataset.rates.split(",");
    SWEEP_PARAMS.forEach(function (k, i) { form.elements[k].value = rates[i]; });
    kept.classList.add("stale");
    kept.removeAttribute("hx-get"); // a finished sweep never polls; nothing of the old one may
    if (!kept.querySelector("[data-goodput-stale]")) {
      var template = document.getElementById("goodput-stale-template");
      if (template) kept.insertBefore(document.importNode(template.content, true), kept.firstChild);
    }
    var note = kept.querySelector("[data-goodput-stale] [data-rates]");
    if (note) note.textContent = rates[0] + "–" + rates[1] + " req/s, step " + rates[2];
    fresh.parentNode.replaceChild(kept, fresh);
  });

  document.addEventListener("click", function (e) {
    if (!e.target.closest("[data-goodput-redraw]")) return;
    var form = document.getElementById("goodput-form");
    if (form) htmx.trigger(form, "submit");
  });

  htmx.onLoad(keepChangesHere);
  htmx.onLoad(showExportChoice);
  htmx.onLoad(drawFigures);
  if (EMBED) htmx.onLoad(fitEmbed);
  document.body.addEventListener("htmx:beforeSwap", function (e) {
    if (e.detail.shouldSwap && e.detail.target) release(e.detail.target);
  });
})();
