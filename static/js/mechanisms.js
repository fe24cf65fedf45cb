/* The form's Advanced sections, one per mechanism (templates/_form.html, sim_core/field_groups.py). A mechanism
   with a switch shows its fields while on. Switching it on enables them and, where the mechanism names an on
   value (speculative decoding: its first proposer), sets its switch field to it and runs; where the switch is a
   number the user gives (LoRA adapters, replicas), it focuses that field instead (or runs with the number it had
   before the mechanism was switched off). Switching it off disables its
   fields, so the next run (started here) leaves them at their defaults and the URL drops them. A section
   without a switch (the engine's settings) only folds. The switch's own change never reaches the form
   (data-change-stays-here): the run starts from the field it set, or from the form once the fields are off. */

function sectionOf(el) {
  return el.closest && el.closest("section.mechanism");
}

function setFields(section, on) {
  var box = section.querySelector(".mech-fields");
  box.hidden = !on;
  section.classList.toggle("on", on);
  box.querySelectorAll("input, select").forEach(function (input) { input.disabled = !on; });
}

function changed(el) {
  el.dispatchEvent(new Event("change", { bubbles: true }));
}

function onSwitch(e) {
  var sw = e.target;
  if (!sw.matches || !sw.matches("input.mech-switch")) return;
  var section = sectionOf(sw);
  setFields(section, sw.checked);
  var field = section.querySelector('[name="' + sw.dataset.switch + '"]');
  if (!sw.checked) {
    changed(sw.form || document.getElementById("scenario-form"));
    return;
  }
  if (!field) return;
  if (sw.dataset.onValue && !field.value) field.value = sw.dataset.onValue;
  if (field.value) changed(field); // on again with the value it had: run with it
  else field.focus();
}

function onFold(e) {
  var button = e.target.closest && e.target.closest("button.mech-fold");
  if (!button) return;
  var open = button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", open ? "true" : "false");
  sectionOf(button).querySelector(".mech-fields").hidden = !open;
}

// A field the answer marks invalid is shown, its section unfolded (a switched section: as it stands, on).
export function revealSection(field) {
  var section = sectionOf(field);
  if (!section) return;
  section.querySelector(".mech-fields").hidden = false;
  var fold = section.querySelector("button.mech-fold");
  if (fold) fold.setAttribute("aria-expanded", "true");
  var sw = section.querySelector("input.mech-switch");
  if (sw) sw.checked = true;
  section.classList.add("on");
}

// Capture phase: the fields are enabled (or disabled) before anything reads the form.
export function wireMechanisms() {
  document.addEventListener("change", onSwitch, true);
  document.addEventListener("click", onFold);
}
