// Building the page: elements from data, never HTML strings, so nothing the
// server returns (a job name, a JDL) can inject markup.

/** h("a", {href: "#/jobs", class: "x"}, "text", child, ...) -> an element. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
}

/** Replace an element's children. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** A table in a scrollable, focusable region (narrow screens scroll it sideways). */
export function table(label, columns, rows, cell = (row, column) => row[column]) {
  return h("div", {class: "table-wrap", role: "region", "aria-label": label, tabindex: 0},
    h("table", {},
      h("caption", {class: "visually-hidden"}, label),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, rows.length
        ? rows.map((row) => h("tr", {}, columns.map((c) => h("td", {dataset: {column: c}}, cell(row, c) ?? ""))))
        : h("tr", {}, h("td", {colspan: columns.length, class: "empty"}, "none")))));
}

/** A labelled form control: <label for=id>text</label> + control (+ hint). */
export function field(text, control, hint) {
  const id = control.id || (control.id = `f-${Math.random().toString(36).slice(2, 9)}`);
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h("div", {class: "field"}, h("label", {for: id}, text), control,
    hint ? h("small", {id: hintId, class: "hint"}, hint) : null);
}

/** A local date and time as people read it ("2026-11-25 15:04:05"). */
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A status message region: role=status for news, role=alert for errors. */
export function notice(text, kind = "info") {
  return h("p", {class: `notice ${kind}`, role: kind === "error" ? "alert" : "status"}, text);
}

/** A meter of used out of total, with its numbers beside it for sighted and screen-reader users alike. */
export function bar(label, used, total, shown) {
  const ratio = total > 0 ? Math.min(1, used / total) : 0;
  return h("span", {class: "bar-cell"},
    h("meter", {min: 0, max: total > 0 ? total : 1, value: Math.min(used, total > 0 ? total : 1),
      high: total * 0.9, optimum: 0, "aria-label": `${label}: ${shown}`, class: ratio >= 1 ? "full" : ""}),
    h("span", {class: "bar-text"}, shown));
}

/** Ask in place before a destructive action: `box` shows the question with a
 * confirming and a cancelling button; `onYes` runs on confirmation; the focus
 * goes back to `back` on cancel. */
export function confirmInPlace(box, question, yesLabel, onYes, back) {
  const yes = h("button", {type: "button", class: "danger"}, yesLabel);
  const no = h("button", {type: "button"}, "Cancel");
  fill(box, h("p", {}, question), yes, no);
  box.hidden = false;
  no.addEventListener("click", () => { box.hidden = true; back?.focus(); });
  yes.addEventListener("click", async () => { box.hidden = true; await onYes(); });
  yes.focus();
}
