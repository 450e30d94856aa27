// One advance reservation as `qrstat -ar ID` shows it, qralter's changes, and qrdel.

import {api, get, query} from "../api.js";
import {h, fill, field, notice, when, confirmInPlace} from "../dom.js";
import {commaList, zoned} from "./reservations.js";

function detail(ar) {
  const range = ar.pe ? `${ar.pe} ${ar.pe_range[0]}-${ar.pe_range[1]}` : "NONE";
  const rows = [
    ["ar_number", ar.ar_id], ["submission_time", when(ar.submission_time)], ["owner", ar.owner],
    ["acl_list", ar.acl.join(",")], ["start", when(ar.start)], ["end", when(ar.end)], ["duration", ar.duration],
    ["slots", ar.slots], ["complex_values", ar.complex_values], ["ar_name", ar.name], ["state", ar.state],
    ["account", ar.account],
    ["resource_list", Object.entries(ar.resources).map(([k, v]) => `${k}=${v}`).join(",") || "NONE"],
    ["queue_list", ar.queues.join(",") || "NONE"],
    ["granted_queues", ar.granted.map((g) => g.host ? `${g.queue}@${g.host}=${g.slots}` : `${g.queue}=${g.slots}`).join(",")],
    ["pe", range], ["checkpoint_name", ar.ckpt || "NONE"], ["mail_options", ar.mail_options],
    ["mail_list", ar.mail_list || "NONE"], ["error_handling", ar.hard_error ? "hard" : "soft"],
  ];
  if (ar.message) rows.push(["message", ar.message]);
  return h("dl", {class: "summary", id: "ar-detail"}, rows.map(([name, value]) =>
    h("div", {dataset: {field: name}}, h("dt", {}, name), h("dd", {}, value ?? ""))));
}

function alterForm(ar, status, reload) {
  const input = (id, value = "", attributes = {}) => h("input", {id, value, autocomplete: "off", ...attributes});
  const c = {
    name: input("alter-name", ar.name), users: input("alter-users", ar.acl.join(",")),
    mail: input("alter-mail", ar.mail_options), mailList: input("alter-mail-list", ar.mail_list || ""),
    end: input("alter-end", "", {type: "datetime-local", step: 1}), duration: input("alter-duration", "", {placeholder: ar.duration}),
  };
  const form = h("form", {class: "card", "aria-labelledby": "alter-h"}, h("h2", {id: "alter-h"}, "Change (qralter)"),
    h("div", {class: "form-grid"}, field("Name (-N)", c.name), field("Users (-u)", c.users),
      field("Mail (-m)", c.mail, "b, e, a or n"), field("Mail to (-M)", c.mailList),
      field("New end (-e)", c.end), field("New duration (-d)", c.duration, "h:m:s or seconds")),
    h("div", {class: "actions"}, h("button", {type: "submit"}, "Change")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // Only what was changed is sent, as qralter sends only the switches given.
    const change = {};
    if (c.name.value !== ar.name) change.name = c.name.value;
    if (c.users.value !== ar.acl.join(",")) change.users = commaList(c.users.value);
    if (c.mail.value !== ar.mail_options) change.mail_options = c.mail.value;
    if (c.mailList.value !== (ar.mail_list || "")) change.mail_list = commaList(c.mailList.value);
    if (c.end.value) change.end = zoned(c.end.value);
    if (c.duration.value.trim()) change.duration = c.duration.value.trim();
    if (!Object.keys(change).length) {
      fill(status, notice("nothing to change: give a name, users, mail, an end or a duration", "error"));
      return;
    }
    try {
      const answer = await api("PATCH", `/reservations/${ar.ar_id}`, change);
      await reload();
      fill(status, notice(answer.message));
    } catch (error) {
      fill(status, notice(error.message, "error"));
    }
  });
  return form;
}

export async function render(main, {params, go, flash}) {
  const id = params[0];
  const status = h("div", {"aria-live": "polite", id: "ar-status"}, flash ? notice(flash) : null);
  const body = h("div");
  fill(main, h("p", {class: "crumbs"}, h("a", {href: "#/reservations"}, "Reservations"), " / ", `AR ${id}`),
    h("h1", {}, `Advance reservation ${id}`), status, body);

  async function reload() {
    let ar;
    try {
      [ar] = await get(`/reservations${query({ar: id})}`);
    } catch (error) {
      fill(body, notice(error.message, "error"));
      return;
    }
    const remove = h("button", {type: "button", class: "danger", id: "ar-delete"}, "Delete (qrdel)");
    const confirmBox = h("div", {class: "confirm", hidden: true, role: "group", "aria-label": "Confirm delete"});
    remove.addEventListener("click", () => confirmInPlace(confirmBox,
      `Delete advance reservation ${ar.ar_id}? Its jobs are deleted first.`, `Delete reservation ${ar.ar_id}`, async () => {
        try {
          const answer = await api("POST", "/reservations/delete", {selectors: [String(ar.ar_id)]});
          go("#/reservations", answer.messages.join(" "));
        } catch (error) {
          fill(status, notice(error.message, "error"));
        }
      }, remove));
    // Offered only to whom the API lets do it (its owner, operators, managers).
    fill(body, detail(ar), ...(ar.may_change ? [h("div", {class: "actions"}, remove), confirmBox,
      alterForm(ar, status, reload)] : [h("p", {class: "hint", id: "ar-not-yours"},
      `Only its owner (${ar.owner}), operators and managers may change or delete this reservation.`)]));
  }
  await reload();
}
