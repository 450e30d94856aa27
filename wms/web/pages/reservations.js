// Advance reservations: the list as qrstat shows it, and a form with qrsub's
// options. The server validates and refuses with qrsub's own messages,
// shown as they come.

import {api} from "../api.js";
import {h, fill, field, notice, table, when} from "../dom.js";
import {pager} from "../pager.js";

/** "a=1,b=2" -> {a: "1", b: "2"}: Grid Engine's resource request list, as qrsub -l reads it. */
export function requestList(text) {
  const out = {};
  if (!text.trim()) return out;
  for (const item of text.split(",")) {
    const at = item.indexOf("=");
    const name = at < 0 ? "" : item.slice(0, at).trim();
    const value = at < 0 ? "" : item.slice(at + 1).trim();
    if (!name || !value) throw new Error(`-l '${text}': expected name=value[,name=value...], got '${item}'`);
    out[name] = value;
  }
  return out;
}

/** "a, b" -> ["a", "b"] (qrsub's comma lists). */
export const commaList = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

/** A datetime-local value (the browser's zone) as ISO 8601 with its zone, or null. */
export const zoned = (value) => value ? new Date(value).toISOString() : null;

function newForm(status, go) {
  const input = (id, attributes = {}) => h("input", {id, name: id, autocomplete: "off", ...attributes});
  const c = {
    start: input("ar-start", {type: "datetime-local", step: 1}),
    end: input("ar-end", {type: "datetime-local", step: 1}),
    duration: input("ar-duration", {placeholder: "1:00:00"}),
    name: input("ar-name"),
    account: input("ar-account", {placeholder: "sge"}),
    resources: input("ar-resources", {placeholder: "slots=2,compiler_lic=1"}),
    queues: input("ar-queues", {placeholder: "LCG.CERN.ch/ce01.cern.ch/long"}),
    pe: input("ar-pe", {placeholder: "mpi"}),
    peSlots: input("ar-pe-slots", {placeholder: "4 or 2-8"}),
    users: input("ar-users", {placeholder: "roland,@staff"}),
    mail: h("select", {id: "ar-mail"}, [["n", "none"], ["b", "at the beginning"], ["e", "at the end"],
      ["a", "on error"], ["be", "beginning and end"], ["bea", "beginning, end, error"]]
      .map(([v, t]) => h("option", {value: v}, `${v}: ${t}`))),
    mailList: input("ar-mail-list", {type: "text", placeholder: "roland@example.org"}),
    verify: input("ar-verify", {type: "checkbox"}),
  };
  const form = h("form", {class: "card", id: "ar-form", "aria-labelledby": "ar-form-h"},
    h("h2", {id: "ar-form-h"}, "qrsub options"),
    h("fieldset", {}, h("legend", {}, "When"), h("div", {class: "form-grid"},
      field("Start (-a)", c.start, "empty: now"), field("End (-e)", c.end),
      field("Duration (-d)", c.duration, "h:m:s or seconds; give an end or a duration"))),
    h("fieldset", {}, h("legend", {}, "What"), h("div", {class: "form-grid"},
      field("Name (-N)", c.name), field("Resources (-l)", c.resources, "name=value,..."),
      field("Queues (-q)", c.queues, "comma separated, wildcards allowed"),
      field("Parallel environment (-pe)", c.pe), field("PE slots", c.peSlots, "with -pe: a slot range"),
      field("Account (-A)", c.account))),
    h("fieldset", {}, h("legend", {}, "Who and mail"), h("div", {class: "form-grid"},
      field("Users (-u)", c.users, "users and @user sets who may submit into it"),
      field("Mail (-m)", c.mail), field("Mail to (-M)", c.mailList, "comma separated"))),
    h("div", {class: "field inline"}, h("label", {for: "ar-verify"}, c.verify, " Only verify (-w v)")),
    h("div", {class: "actions"}, h("button", {type: "submit"}, "Reserve")));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(status);
    let body;
    try {
      body = {
        start: zoned(c.start.value), end: zoned(c.end.value), duration: c.duration.value.trim() || null,
        name: c.name.value.trim(), account: c.account.value.trim() || "sge", resources: requestList(c.resources.value),
        queues: commaList(c.queues.value), users: commaList(c.users.value), pe: c.pe.value.trim() || null,
        pe_slots: c.peSlots.value.trim() || null, mail_options: c.mail.value, mail_list: commaList(c.mailList.value),
        verify: c.verify.checked,
      };
    } catch (error) {
      fill(status, notice(error.message, "error"));
      c.resources.focus();
      return;
    }
    try {
      const answer = await api("POST", "/reservations", body);
      fill(status, notice(answer.message, body.verify && !answer.verified ? "error" : "info"));
      if (answer.ar_id) go(`#/reservations/${answer.ar_id}`, answer.message);
    } catch (error) {
      fill(status, notice(error.message, "error"));
    }
  });
  return form;
}

export async function render(main, {params, go, flash, allowed}) {
  const status = h("div", {"aria-live": "polite", id: "ar-status"}, flash ? notice(flash) : null);
  const list = h("div", {id: "ar-list"});
  const creating = params[0] === "new";
  fill(main, h("h1", {}, creating ? "New reservation" : "Reservations"),
    creating || !allowed("POST /reservations") ? null
      : h("div", {class: "actions"}, h("a", {href: "#/reservations/new", class: "button"}, "New reservation")),
    status, creating ? newForm(status, go) : list);
  if (creating) return;
  // The server sends the reservations a page at a time, by id.
  const rowsOf = h("div");
  const pages = pager({path: "/reservations", noun: "reservations", draw: (rows) => fill(rowsOf,
    table("Advance reservations (qrstat)", ["AR-ID", "name", "user", "state", "start at", "end at", "duration"],
      rows, (ar, c) => ({
        "AR-ID": h("a", {href: `#/reservations/${ar.ar_id}`}, ar.ar_id), name: ar.name, user: ar.owner, state: ar.state,
        "start at": when(ar.start), "end at": when(ar.end), duration: ar.duration,
      })[c]))});
  fill(list, pages.element, rowsOf);
  await pages.load();
}
