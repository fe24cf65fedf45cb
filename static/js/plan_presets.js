/* The Plan form's presets (templates/plan.html): a button whose data-preset holds a JSON object of field name ->
   value (a checkbox group: the list of values to tick). One click fills those fields and leaves the rest of the
   form as it was; the plan starts when the form is sent, so a preset can be looked at, and edited, first. */
export function wirePresets() {
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-preset]") : null;
    if (!button || !button.form) return;
    var values = JSON.parse(button.dataset.preset);
    Object.keys(values).forEach(function (name) {
      var value = values[name];
      button.form.querySelectorAll('[name="' + name + '"]').forEach(function (input) {
        if (input.type === "checkbox") input.checked = value.indexOf(input.value) >= 0;
        else if (input.type !== "hidden") input.value = value;
      });
    });
    var status = document.getElementById(button.getAttribute("aria-controls") || "");
    if (status) status.textContent = button.dataset.presetDone || "";
  });
}
