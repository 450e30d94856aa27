// The complex table as `qconf -sc` shows it; managers replace it as with
// `qconf -Mc`, the errors shown at their line.

import {api, get} from "../api.js";
import {h, fill, notice} from "../dom.js";
import {editor} from "../editor.js";

export const SOURCE = "complex file";

export async function render(main, {allowed}) {
  const status = h("div", {"aria-live": "polite", id: "cx-status"});
  const body = h("div");
  fill(main, h("h1", {}, "Complexes"), status, body);
  const mayEdit = allowed("PUT /complexes");

  async function show(message) {
    const {text} = await get("/complexes");
    fill(body, h("pre", {class: "plain-text", id: "complex-table", tabindex: 0, "aria-label": "Complex table"}, text),
      mayEdit ? h("div", {class: "actions"}, h("button", {type: "button", onclick: () => edit(text)}, "Edit the complex table")) : null);
    if (message) fill(status, notice(message));
  }

  function edit(text) {
    const box = editor({label: "Complex table (qconf -Mc)", text, rows: text.split("\n").length + 1, source: SOURCE});
    const form = h("form", {}, box.element, h("div", {class: "actions"},
      h("button", {type: "submit"}, "Save"), h("button", {type: "button", class: "secondary", onclick: () => show()}, "Cancel")));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const answer = await api("PUT", "/complexes", {text: box.value});
        await show(answer.messages.join(" "));
      } catch (error) {
        box.showError(error.message);
      }
    });
    fill(status);
    fill(body, form);
    box.box.focus();
  }
  await show();
}
