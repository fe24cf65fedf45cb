/* sched-sim dashboard: draws the server-built plotly figures, runs the KV-pool animation (moving the time
   cursor on the timelines with it), exports figures, copies links. Figures arrive as JSON in
   <script type="application/json" data-figure-for="plot-id"> next to their <div>; htmx.onLoad draws every
   new one, on the first page load and after each swap. */
(function () {
  "use strict";

  var PLOT_CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
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
    div._drawing = plotlyReady.then(function () { return drawNow(div); });
    return div._drawing;
  }

  function drawNow(div) {
    var script = figureScript(div);
    if (!script || !document.body.contains(div)) return null;
    var fig = JSON.parse(script.textContent);
    // autosize measures the container on every relayout: pin its height, or a redraw collapses it.
    if (fig.layout.height) div.style.height = fig.layout.height + "px";
    var frames = document.querySelector('script[data-kv-frames-for="' + div.id + '"]');
    var done;
    if (frames) {
      var player = new KvPlayer(div, fig, JSON.parse(frames.textContent));
      players.push(player);
      done = player.ready;
    } else {
      done = Plotly.newPlot(div, fig.data, fig.layout, figureConfig(div)).then(function () {
        if (div.hasAttribute("data-cursor") && cursorTime !== null) return placeCursor(div, cursorTime);
      });
    }
    return done.then(function () { div.dataset.drawn = "1"; });
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

  function drawFigures(root) {
    var scripts = root.querySelectorAll("script[data-figure-for]");
    for (var i = 0; i < scripts.length; i++) {
      var div = document.getElementById(scripts[i].dataset.figureFor);
      if (!div || div.dataset.drawn) continue;
      if (observer) observer.observe(div); else draw(div);
    }
    plotlyReady.then(drawWhenIdle);
  }

  // ----- KV-pool animation -----
  var SHADES = 6;

  function KvPlayer(div, fig, spec) {
    this.div = div;
    this.spec = spec;
    this.steps = Math.max(1, spec.steps);
    this.index = 0;
    this.timer = null;
    this.pending = false;
    this.scheds = spec.schedulers.map(function (s) { return { s: s, cache: {}, frame: -1 }; });
    var controls = document.querySelector('[data-kv-controls="' + div.id + '"]');
    this.playButton = controls && controls.querySelector("[data-play]");
    this.scrub = controls && controls.querySelector("[data-scrub]");
    this.label = controls && controls.querySelector("[data-clock]");
    var self = this;
    var start = Math.min(this.steps - 1, spec.start || 0), t0 = this.timeAt(start);
    this.scheds.forEach(function (st, i) {
      var f = Math.max(0, self.frameAt(st.s, t0));
      var d = self.decode(st, f);
      fig.data[i].z = d.z;
      fig.data[i].text = d.text;
      st.frame = f;
    });
    this.ready = Plotly.newPlot(div, fig.data, fig.layout, figureConfig(div)).then(function () { return self.show(start); });
    if (this.playButton) this.playButton.addEventListener("click", function () { self.toggle(); });
    if (this.scrub) this.scrub.addEventListener("input", function () { self.stop(); self.show(+self.scrub.value); });
  }

  KvPlayer.prototype.timeAt = function (j) {
    return this.steps > 1 ? this.spec.horizon * j / (this.steps - 1) : 0;
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

  KvPlayer.prototype.decode = function (st, f) {
    if (st.cache[f]) return st.cache[f];
    var s = st.s, k = s.k, K = k + 1, rows = s.rows, cols = s.cols;
    var z = [], text = [];
    for (var r = 0; r < rows; r++) { z.push(new Array(cols).fill(null)); text.push(new Array(cols).fill("")); }
    var runs = s.runs[f] || [], cell = 0;
    for (var i = 0; i < runs.length; i += 2) {
      var code = runs[i], len = runs[i + 1];
      var owner = Math.floor(code / K) - 1, used = code % K;
      var value = owner < 0 ? 0 : 1 + (owner % SHADES);
      for (var n = 0; n < len; n++, cell++) {
        var row = Math.floor(cell / cols), col = cell % cols;
        var first = cell * k, last = Math.min(s.blocks, first + k) - 1;
        var where = k > 1 ? "blocks " + first + "–" + last : "block " + first;
        z[row][col] = value;
        text[row][col] = owner < 0 ? where + ": free"
          : where + ": request #" + owner + (k > 1 ? " (" + used + "/" + (last - first + 1) + " in use)" : "");
      }
    }
    var out = { z: z, text: text };
    st.cache[f] = out;
    return out;
  };

  KvPlayer.prototype.show = function (j) {
    this.index = j;
    var t = this.timeAt(j), self = this;
    var update = { z: [], text: [] }, traces = [], relayout = {};
    this.scheds.forEach(function (st, i) {
      var f = self.frameAt(st.s, t);
      if (f < 0) return;
      if (f !== st.frame) {
        var d = self.decode(st, f);
        update.z.push(d.z);
        update.text.push(d.text);
        traces.push(i);
        st.frame = f;
      }
      // the same words as charts.kv_title
      var pct = st.s.usage.length ? (100 * st.s.usage[f]).toFixed(0) : "0";
      relayout["annotations[" + i + "].text"] = "<b>" + st.s.name + "</b><br>" + pct + "% of "
        + st.s.blocks.toLocaleString("en-US") + " blocks in use";
    });
    var work = [];
    if (traces.length) work.push(Plotly.restyle(this.div, update, traces));
    work.push(Plotly.relayout(this.div, relayout));
    if (this.scrub) this.scrub.value = String(j);
    if (this.label) this.label.textContent = "t = " + t.toFixed(2) + " s";
    this.div.dataset.frame = String(j);
    moveCursors(t);
    var div = this.div;
    // data-time: the simulated time of the frame last drawn (a hook for tests and tools: frames per second)
    return Promise.all(work).then(function () { div.dataset.time = t.toFixed(4); });
  };

  KvPlayer.prototype.toggle = function () {
    if (this.timer) { this.stop(); return; }
    if (this.index >= this.steps - 1) this.show(0);
    var self = this;
    this.timer = setInterval(function () {
      if (self.pending) return; // drawing is behind: skip a tick rather than queue frames
      if (self.index >= self.steps - 1) { self.stop(); return; }
      self.pending = true;
      self.show(self.index + 1).then(function () { self.pending = false; }, function () { self.pending = false; });
    }, 120);
    if (this.playButton) { this.playButton.textContent = "❚❚ Pause"; this.playButton.setAttribute("aria-label", "Pause"); }
  };

  KvPlayer.prototype.stop = function () {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.playButton) { this.playButton.textContent = "▶ Play"; this.playButton.setAttribute("aria-label", "Play the animation"); }
  };

  function placeCursor(div, t) {
    return Plotly.relayout(div, { "shapes[0].x0": t, "shapes[0].x1": t, "shapes[0].visible": true });
  }

  function moveCursors(t) {
    cursorTime = t;
    var divs = document.querySelectorAll("[data-cursor]");
    for (var i = 0; i < divs.length; i++) {
      if (divs[i]._fullLayout) placeCursor(divs[i], t); // plotted; the others get it when drawn
    }
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

  document.addEventListener("click", function (e) {
    var exp = e.target.closest("[data-export]");
    if (exp) {
      var gd = document.getElementById(exp.dataset.target);
      if (!gd) return;
      var format = exp.dataset.export;
      draw(gd).then(function () {
        return Plotly.downloadImage(gd, {
          format: format, filename: "sched-sim-" + (exp.dataset.filename || gd.dataset.figure),
          width: gd.offsetWidth, height: gd.offsetHeight, scale: format === "png" ? 2 : 1,
        });
      });
      return;
    }
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

  htmx.onLoad(keepChangesHere);
  htmx.onLoad(drawFigures);
  document.body.addEventListener("htmx:beforeSwap", function (e) {
    if (e.detail.shouldSwap && e.detail.target) release(e.detail.target);
  });
})();
