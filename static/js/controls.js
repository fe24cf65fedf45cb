/* The page's small controls: a metric's glossary entry, Copy link, and the top bar's links kept on the scenario shown. */

export function wireControls() {
  document.addEventListener("click", function (e) {
    var term = e.target.closest(".metrics .term");
    if (term) { toggleGlossary(term); return; }
    var copy = e.target.closest("[data-copy-link]");
    if (copy) {
      copyText(window.location.href).then(function () { flash(copy, "Link copied ✓"); },
        function () { window.prompt("Copy this link:", window.location.href); });
    }
  });
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

// The clipboard API where the page may use it (a secure context), else the old copy command.
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

// ----- the top bar's links follow the scenario the dashboard shows -----
// The server writes them with the page's scenario (templates/_macros.html, topbar); a change of the form swaps in
// new results, whose region names their scenario in data-scenario-query, so the links open that one.
export function followScenario(root) {
  var shown = root.querySelector ? root.querySelector("[data-scenario-query]") : null;
  if (root.matches && root.matches("[data-scenario-query]")) shown = root;
  if (!shown) return;
  var q = shown.getAttribute("data-scenario-query");
  document.querySelectorAll(".topnav a[data-carry]").forEach(function (a) {
    var search = "";
    if (q && a.dataset.carry === "query") search = "?" + q;
    if (q && a.dataset.carry === "pair") search = "?" + new URLSearchParams({ a: q, b: q }).toString();
    a.setAttribute("href", a.dataset.path + search + a.dataset.hash);
  });
}

// ----- how long the page has waited for the kernels (the compile card, templates/_workspace.html) -----
// Counted from the page's own start: the card is swapped in again by each poll, and the server does not say when
// its compile began. A second's tick touches only a card that is there.
export function tickElapsed() {
  setInterval(function () {
    document.querySelectorAll("[data-elapsed]").forEach(function (e) {
      e.textContent = Math.round(performance.now() / 1000) + " s";
    });
  }, 1000);
}
