/* sched-sim dashboard, the entry module (templates/base.html loads it with <script type="module">): wires the
   modules beside it to the page and to htmx, in an order that matters where several listen to one event.
     figures.js        draws the server-built plotly figures (plotly.js loaded after the first paint; on
                       /diff, diff_pick.js: a click on a request's point or timeline compares that request)
     kv_player.js      plays the KV pools on canvases (kv_paint.js, kv_download.js), moving the time cursor on
                       the timelines with it (timeline.js; a click on a time axis seeks it)
     gantt_window.js   a long run's Gantt: every request of a zoomed window
     export.js         PNG/SVG exports (export_text.js: what they say beside the plot)
     form.js           the scenario form: field errors copied in, model and trace uploads
     mechanisms.js     the form's Advanced sections: a mechanism switched on or off, a section folded
     goodput_curves.js drawn goodput sweeps kept across a change of the scenario
     embed.js          an embed fitted to its frame, present mode's keys
     controls.js       the metric glossary, Copy link, the top bar's links on the scenario shown
     plan_presets.js   the Plan form's one-click presets (a day of diurnal load)
     run_progress.js   while the form's request is out, what its runs report doing (a capacity search's run k of n)
   theme.js (dark mode) and slides.js (narrow screens, slide scaling) serve several of them.

   Caching: this file's URL carries ?v=<asset version> (the hash of every static file), so browsers keep it for
   good. The imports below are plain relative URLs (./figures.js): a module's identity is its URL, so every
   module imports each other one by the same URL and each runs once, and an import cannot be given a version
   without a build step. The server answers URLs without ?v= with Cache-Control: no-cache (app/web/server.py),
   so the browser revalidates each imported module (its ETag: a 304 when unchanged) on each page load and never
   runs a stale one beside a new app.js. htmx swaps do not reload modules: a page loads its module graph once. */
import { followScenario, tickElapsed, wireControls } from "./controls.js";
import { fitEmbed, presentOnKeys, rescaleEmbed } from "./embed.js";
import { exportOnClick, rememberExportChoice, showExportChoice } from "./export.js";
import { drawFigures, followColorScheme, purgePlots } from "./figures.js";
import { keepChangesHere, wireForm } from "./form.js";
import { watchGanttWindows } from "./gantt_window.js";
import { wireMechanisms } from "./mechanisms.js";
import { keepGoodputCurves } from "./goodput_curves.js";
import { players, releasePlayers, seekPlayers } from "./kv_player.js";
import { wirePresets } from "./plan_presets.js";
import { reportRunProgress } from "./run_progress.js";
import { EMBED } from "./slides.js";
import { seekOnTimeAxisClicks } from "./timeline.js";

// Before htmx replaces figures: stop their players and free plotly's.
function release(root) {
  releasePlayers(root);
  purgePlots(root);
}

function relayoutOnResize() {
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      players.forEach(function (p) { p.layout(); p.show(p.index); });
      if (EMBED) rescaleEmbed();
    }, 150);
  });
}

followColorScheme();
seekOnTimeAxisClicks(seekPlayers);
relayoutOnResize();
presentOnKeys();
rememberExportChoice();
exportOnClick();
wireControls();
tickElapsed();
wireMechanisms();
wirePresets();
reportRunProgress();
wireForm(); // its htmx:beforeSwap may cancel a swap: before goodput_curves' and release's, which check that
keepGoodputCurves();
htmx.onLoad(keepChangesHere);
htmx.onLoad(showExportChoice);
htmx.onLoad(drawFigures);
htmx.onLoad(followScenario);
if (EMBED) htmx.onLoad(fitEmbed);
document.body.addEventListener("htmx:beforeSwap", function (e) {
  if (e.detail.shouldSwap && e.detail.target) release(e.detail.target);
});
watchGanttWindows();
