// A list the server sends a page at a time (docs/api.md, "Pages"): the page
// shown and two buttons, to the page before and the page after. The server
// keys its pages on each row's id and gives the cursor of the next one; the
// pager keeps the cursors of the pages it went through, to go back.

import {getPage, query} from "./api.js";
import {h, fill} from "./dom.js";

/** Rows a page holds: the view's `?limit=N` (as in #/pilots?limit=50), else 200. */
export function pageSize() {
  const [, search = ""] = location.hash.split("?");
  const asked = Number(new URLSearchParams(search).get("limit"));
  return Number.isInteger(asked) && asked > 0 ? asked : 200;
}

/**
 * A pager over `path` (with `params`): `load()` reads the page shown and hands its rows to
 * `draw(rows)`; `element` holds the buttons "Previous page of NOUN" and "Next page of NOUN" and
 * where the list stands. A page may hold fewer rows than asked, even none, and still lead on.
 */
export function pager({path, params = {}, noun, draw}) {
  const cursors = [null];   // the cursor of each page gone through (null: the first)
  let next = null;          // the cursor of the page after the one shown (null: none)
  const where = h("span", {class: "pager-status", "aria-live": "polite"});
  const previous = h("button", {type: "button", disabled: true, onclick: () => { cursors.pop(); load(); }},
    `Previous page of ${noun}`);
  const following = h("button", {type: "button", disabled: true, onclick: () => { cursors.push(next); load(); }},
    `Next page of ${noun}`);

  async function load() {
    const page = await getPage(path + query({...params, limit: pageSize(), cursor: cursors[cursors.length - 1]}));
    next = page.next;
    previous.disabled = cursors.length <= 1;
    following.disabled = !next;
    fill(where, next || cursors.length > 1 ? `Page ${cursors.length}${next ? "; more on the next" : ", the last"}.` : "");
    draw(page.rows);
  }

  const element = h("div", {class: "actions pager", role: "group", "aria-label": `Pages of ${noun}`},
    previous, following, where);
  return {element, load};
}
