// A text box with line numbers whose errors are shown where they are: the
// line is marked in the gutter and on the text, the caret is put on it, and
// the message (the server's, with its line and column) is tied to the box.

import {h} from "./dom.js";
import {errorPosition} from "./api.js";

export function editor({label, text = "", rows = 14, source, readonly = false}) {
  const id = `ed-${Math.random().toString(36).slice(2, 9)}`;
  const gutter = h("div", {class: "gutter", "aria-hidden": "true"});
  const marker = h("div", {class: "line-marker", hidden: true, "aria-hidden": "true"});
  const box = h("textarea", {id, rows, spellcheck: "false", autocapitalize: "off", autocomplete: "off",
    wrap: "off", readonly, "aria-describedby": `${id}-error`});
  box.value = text;
  const message = h("p", {id: `${id}-error`, class: "editor-error", role: "alert", hidden: true});
  const lines = () => box.value.split("\n").length;

  function number() {
    const count = lines();
    if (gutter.childElementCount === count) return;
    gutter.replaceChildren(...Array.from({length: count}, (_, i) => h("span", {}, i + 1)));
  }
  function follow() {
    gutter.scrollTop = box.scrollTop;
    marker.style.transform = `translateY(${-box.scrollTop}px)`;
  }
  function clear() {
    message.hidden = true;
    message.textContent = "";
    box.removeAttribute("aria-invalid");
    marker.hidden = true;
    for (const span of gutter.querySelectorAll(".error")) span.classList.remove("error");
  }
  box.addEventListener("input", () => { number(); clear(); });
  box.addEventListener("scroll", follow);
  number();

  const frame = h("div", {class: "editor"}, gutter, h("div", {class: "editor-text"}, marker, box));
  const element = h("div", {class: "field editor-field"}, h("label", {for: id}, label), frame, message);

  return {
    element,
    box,
    get value() { return box.value; },
    set value(text) { box.value = text; number(); clear(); },
    clear,
    /** Show the server's error: at its line when it names one in `source`, else above the box. */
    showError(detail) {
      clear();
      const at = source ? errorPosition(detail, source) : null;
      message.hidden = false;
      // "console.jdl:3:13: what" -> "Line 3, column 13: what"
      const what = at ? detail.slice(detail.indexOf(at.text) + at.text.length).replace(/^:\s*/, "") : detail;
      message.textContent = !at ? detail : at.column ? `Line ${at.line}, column ${at.column}: ${what}` : `Line ${at.line}: ${what}`;
      box.setAttribute("aria-invalid", "true");
      if (!at) return;
      const line = Math.min(at.line, lines());
      gutter.children[line - 1]?.classList.add("error");
      const height = parseFloat(getComputedStyle(box).lineHeight) || 20;
      const padding = parseFloat(getComputedStyle(box).paddingTop) || 0;
      marker.style.top = `${padding + (line - 1) * height}px`;
      marker.style.height = `${height}px`;
      marker.hidden = false;
      marker.dataset.line = String(line);
      const before = box.value.split("\n").slice(0, line - 1).join("\n").length + (line > 1 ? 1 : 0);
      box.focus();
      const caret = before + (at.column ?? 1) - 1;
      box.setSelectionRange(caret, caret);
      box.scrollTop = Math.max(0, (line - 3) * height);
      follow();
    },
  };
}
