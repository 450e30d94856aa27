// Overview: jobs by state, pilots by state, matches in the last minutes, full
// queues; refreshed every few seconds without reloading the page.

import {get} from "../api.js";
import {h, fill, when, notice} from "../dom.js";

export const REFRESH_MS = 3000;

function counts(label, values, link) {
  const entries = Object.entries(values);
  return h("section", {class: "card", "aria-label": label},
    h("h2", {}, label),
    h("dl", {class: "counts"}, entries.map(([state, n]) => h("div", {class: `count ${n ? "" : "zero"}`, dataset: {state}},
      h("dt", {}, link ? h("a", {href: link(state)}, state) : state), h("dd", {}, n)))));
}

export async function render(main, {me}) {
  const body = h("div", {class: "overview"});
  const stamp = h("p", {class: "stamp", "aria-live": "off"});
  fill(main, h("h1", {}, "Overview"), stamp, body);
  let timer = null;
  let stopped = false;

  async function refresh() {
    try {
      const view = await get("/overview");
      if (stopped) return;
      fill(body,
        counts(me.Role === "user" ? "My jobs by state" : "Jobs by state", view.Jobs,
          (state) => `#/jobs?status=${encodeURIComponent(state)}`),
        view.Pilots === null ? null : counts("Pilots by state", Object.keys(view.Pilots).length ? view.Pilots : {none: 0}),
        h("section", {class: "card", "aria-label": "Recent matches"},
          h("h2", {}, "Matches"),
          h("p", {class: "big", id: "recent-matches"}, view.RecentMatches),
          h("p", {}, `jobs handed to pilots in the last ${view.RecentMinutes} minutes`)),
        h("section", {class: "card wide", "aria-label": "Full queues"},
          h("h2", {}, "Full"),
          view.FullQueues.length
            ? h("ul", {id: "full-queues"}, view.FullQueues.map((q) =>
              h("li", {}, h("strong", {}, q.Name), ` (${q.Kind}): `, q.Full.join(", "))))
            : h("p", {id: "full-queues"}, "Nothing is full.")));
      fill(stamp, `Updated ${when(view.Time)}; refreshed every ${REFRESH_MS / 1000} s.`);
    } catch (error) {
      if (!stopped) fill(stamp, notice(`Not refreshed: ${error.message}`, "error"));
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
  }
  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
