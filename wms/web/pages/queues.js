// Queues and pools: global, queue and host usage as `wms queues` (resv/used/tot
// slots and each consumable) drawn as bars; the task queues; the SubmitPools
// with the queues each may go to. The server sends task queues and pools a
// page at a time (by id), each list with its own pager.

import {get} from "../api.js";
import {h, fill, bar, notice, table} from "../dom.js";
import {pager} from "../pager.js";

/** "used/total" (numbers, maybe with a unit letter) -> [used, total], or null. */
export function usedOfTotal(shown) {
  const match = /^([\d.]+)([KMGT]?)\/([\d.]+)([KMGT]?)$/i.exec(String(shown));
  if (!match) return null;
  const scale = {"": 1, k: 1e3, m: 1e6, g: 1e9, t: 1e12};
  return [Number(match[1]) * scale[match[2].toLowerCase()], Number(match[3]) * scale[match[4].toLowerCase()]];
}

function slots(row) {
  const [resv, used, total] = String(row["resv/used/tot"]).split("/");
  if (!/^\d+$/.test(total ?? "")) return row["resv/used/tot"];
  const busy = Number(resv) + Number(used);
  return bar(`${row.Name} slots`, busy, Number(total), `${resv}/${used}/${total}`);
}

function consumables(row) {
  const entries = Object.entries(row.Consumables);
  if (!entries.length) return "";
  return h("ul", {class: "plain"}, entries.map(([name, shown]) => {
    const pair = usedOfTotal(shown);
    return h("li", {}, h("span", {class: "cx-name"}, name), " ",
      pair ? bar(`${row.Name} ${name}`, pair[0], pair[1], shown) : shown);
  }));
}

/** The pool's queues, read when the person opens the list (a pool may go to hundreds). */
function poolQueues(row) {
  const list = h("ul", {class: "plain"});
  const count = row.QueueCount ?? "?";
  const details = h("details", {}, h("summary", {}, `${count} ${count === 1 ? "queue" : "queues"}`), list);
  details.addEventListener("toggle", async () => {
    if (!details.open || list.childElementCount) return;
    try {
      const pool = await get(`/pools/${encodeURIComponent(row.SubmitPool)}`);
      fill(list, pool.Queues.length ? pool.Queues.map((q) => h("li", {}, q)) : h("li", {}, "none"));
    } catch (error) {
      fill(list, h("li", {}, notice(error.message, "error")));
    }
  });
  return details;
}

export async function render(main, {allowed}) {
  const usage = h("div", {id: "queue-usage"});
  const taskQueues = h("div", {id: "task-queues"});
  const pools = h("div", {id: "pools"});
  fill(main, h("h1", {}, "Queues and pools"),
    h("section", {"aria-labelledby": "usage-h"}, h("h2", {id: "usage-h"}, "Usage"),
      h("p", {}, "Slots as reserved/used/total (reserved for advance reservations), and each consumable as used/total."),
      usage),
    allowed("GET /task-queues") ? h("section", {"aria-labelledby": "tq-h"}, h("h2", {id: "tq-h"}, "Task queues"), taskQueues) : null,
    h("section", {"aria-labelledby": "pools-h"}, h("h2", {id: "pools-h"}, "SubmitPools"), pools));

  const tqPages = pager({path: "/task-queues", noun: "task queues", draw: (tqs) => fill(taskQueues,
    table("Task queues", ["TaskQueue", "Owner", "OwnerGroup", "SubmitPool", "CPUTime", "Priority", "WaitingJobs"], tqs))});
  const poolPages = pager({path: "/pools", noun: "pools", draw: (poolRows) => fill(pools,
    table("SubmitPools and the queues each may go to", ["SubmitPool", "VO", "Requirements", "Jobs", "Queues"],
      poolRows, (row, c) => c === "Queues" ? poolQueues(row)
        : c === "Jobs" ? Object.entries(row.Jobs ?? {}).map(([s, n]) => `${s} ${n}`).join(", ")
          : c === "Requirements" ? h("code", {}, typeof row.Requirements === "string" ? row.Requirements : JSON.stringify(row.Requirements))
            : row[c]))});
  taskQueues.before(tqPages.element);
  pools.before(poolPages.element);
  const shown = (element) => (error) => fill(element, notice(error.message, "error"));
  const [rows] = await Promise.all([
    get("/queues").catch((e) => e),
    allowed("GET /task-queues") ? tqPages.load().catch(shown(taskQueues)) : null,
    poolPages.load().catch(shown(pools))]);
  fill(usage, rows instanceof Error ? notice(rows.message, "error") :
    table("Usage by level", ["Kind", "Name", "Slots", "Consumables"], rows,
      (row, c) => c === "Slots" ? slots(row) : c === "Consumables" ? consumables(row) : row[c]));
}
