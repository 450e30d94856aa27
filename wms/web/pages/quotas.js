// Resource quota sets: their usage as qquota shows it, and each set's text
// (qconf -srqs), edited in place with the parser's errors at their line
// (qconf -Mrqs) and enabled or disabled (qconf -mattr resource_quota enabled).

import {api, get, query} from "../api.js";
import {h, fill, notice, table} from "../dom.js";
import {editor} from "../editor.js";

export const SOURCE = "rule set";

/** The value of "enabled" in a set's text (sge_resource_quota(5): TRUE unless it says otherwise). */
export function isEnabled(text) {
  const match = /^\s*enabled\s+(\S+)/mi.exec(text);
  return !match || ["true", "1"].includes(match[1].toLowerCase());
}

function ruleSet(name, text, {mayEdit, reload, status}) {
  const enabled = isEnabled(text);
  const slug = name.replace(/[^A-Za-z0-9_-]/g, "_");
  const body = h("div");
  const card = h("section", {class: "card rule-set", "aria-labelledby": `rqs-${slug}`, dataset: {set: name}},
    h("h3", {id: `rqs-${slug}`}, name, " ", h("span", {class: enabled ? "badge on" : "badge off"}, enabled ? "enabled" : "disabled")),
    body);

  function show() {
    fill(body, h("pre", {class: "plain-text", tabindex: 0, "aria-label": `Rule set ${name}`}, text),
      mayEdit ? h("div", {class: "actions"},
        h("button", {type: "button", onclick: edit}, `Edit ${name}`),
        h("button", {type: "button", class: "secondary", onclick: toggle}, `${enabled ? "Disable" : "Enable"} ${name}`)) : null);
  }

  async function toggle() {
    try {
      const answer = await api("POST", "/rqs/attributes",
        {switch: "mattr", attribute: "enabled", value: enabled ? "false" : "true", target: name});
      await reload(answer.messages.join(" "));
    } catch (error) {
      fill(status, notice(error.message, "error"));
    }
  }

  function edit() {
    const box = editor({label: `Text of ${name}`, text, rows: Math.max(8, text.split("\n").length + 2), source: SOURCE});
    const form = h("form", {}, box.element, h("div", {class: "actions"},
      h("button", {type: "submit"}, "Save"), h("button", {type: "button", class: "secondary", onclick: show}, "Cancel")));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const answer = await api("PUT", "/rqs", {text: box.value, name, source: SOURCE});
        await reload(answer.messages.join(" "));
      } catch (error) {
        box.showError(error.message);
      }
    });
    fill(body, form);
    box.box.focus();
  }

  show();
  return card;
}

export async function render(main, {me, allowed, flash}) {
  const status = h("div", {"aria-live": "polite", id: "rqs-status"}, flash ? notice(flash) : null);
  const usage = h("div", {id: "quota-usage"});
  const sets = h("div", {id: "rule-sets", class: "stack"});
  const everyone = me.Role !== "user";
  fill(main, h("h1", {}, "Quota sets"), status,
    h("section", {"aria-labelledby": "usage-h"}, h("h2", {id: "usage-h"}, "Usage (qquota)"),
      h("p", {}, everyone ? "Every user's rule instances in use." : "Your rule instances in use."), usage),
    h("section", {"aria-labelledby": "sets-h"}, h("h2", {id: "sets-h"}, "Rule sets"), sets));

  async function reload(message) {
    try {
      const [rows, names] = await Promise.all([get(`/quotas${query({users: everyone ? "*" : []})}`), get("/rqs/names")]);
      fill(usage, table("Quota usage", ["resource quota rule", "limit", "filter"], rows,
        (row, c) => ({"resource quota rule": row.rule, limit: row.limit, filter: row.filter})[c]));
      const texts = await Promise.all(names.names.map((n) => get(`/rqs${query({names: n})}`)));
      fill(sets, names.names.length ? names.names.map((n, i) => ruleSet(n, texts[i].text,
        {mayEdit: allowed("PUT /rqs"), reload, status})) : h("p", {}, "No rule set."));
      if (message) fill(status, notice(message));
    } catch (error) {
      fill(status, notice(error.message, "error"));
    }
  }
  await reload();
}
