// The console's shell: sign-in, the navigation of what the role may do, and
// a router on the address's #fragment (#/jobs/12), so every page has a link
// and the browser's back button works; each page is a module in pages/.

import {api, session, whenUnauthorized} from "./api.js";
import {h, fill} from "./dom.js";
import * as signin from "./pages/signin.js";
import * as oidc from "./oidc.js";
import * as overview from "./pages/overview.js";
import * as jobs from "./pages/jobs.js";
import * as job from "./pages/job.js";
import * as submit from "./pages/submit.js";
import * as queues from "./pages/queues.js";
import * as reservations from "./pages/reservations.js";
import * as reservation from "./pages/reservation.js";
import * as quotas from "./pages/quotas.js";
import * as complexes from "./pages/complexes.js";
import * as pilots from "./pages/pilots.js";

// [pattern, page, the action (route) the role needs to see it, nav label]
const ROUTES = [
  [/^$/, overview, "GET /overview", "Overview"],
  [/^jobs$/, jobs, null, "Jobs"],
  [/^jobs\/(\d+)$/, job, null],
  [/^submit$/, submit, "POST /jobs", "Submit"],
  [/^queues$/, queues, "GET /queues", "Queues and pools"],
  [/^reservations$/, reservations, "GET /reservations", "Reservations"],
  [/^reservations\/(new)$/, reservations, "POST /reservations"],
  [/^reservations\/(\d+)$/, reservation, "GET /reservations"],
  [/^quotas$/, quotas, "GET /quotas", "Quota sets"],
  [/^complexes$/, complexes, "GET /complexes", "Complexes"],
  [/^pilots$/, pilots, "GET /pilots", "Pilots"],
];

const main = document.getElementById("main");
let me = null;        // /whoami of the signed-in token
let cleanup = null;   // stops the shown page's live refresh
let flash = null;     // what the last action did, for the page it went to
let turns = 0;        // navigations so far: a page that finishes loading late is not shown

const allowed = (action) => action === null || Boolean(me && me.Allowed[action]);

function currentPath() {
  return decodeURIComponent(location.hash.replace(/^#\/?/, "")).split("?")[0];
}

function showNav() {
  const list = document.getElementById("nav-list");
  fill(list, ROUTES.filter(([, , need, label]) => label && allowed(need)).map(([pattern, , , label]) => {
    const path = pattern.source.replace(/^\^|\$$/g, "");
    return h("li", {}, h("a", {href: `#/${path}`, dataset: {path}}, label));
  }));
  document.getElementById("nav").hidden = false;
  document.getElementById("who").hidden = false;
  fill(document.getElementById("who-text"), `${me.User} (${me.Role}, ${me.Group})`);
}

function markCurrent(path) {
  for (const link of document.querySelectorAll("#nav-list a")) {
    const here = path === link.dataset.path || (link.dataset.path && path.startsWith(`${link.dataset.path}/`));
    if (here) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
}

async function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  if (!session.token() || !me) {
    document.title = "Sign in - WMS console";
    signin.render(main, {onSignedIn});
    return;
  }
  const path = currentPath();
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  if (!found) { location.hash = "#/"; return; }
  const [pattern, page, need] = found;
  if (!allowed(need)) {
    // What the role may not do is not offered; an old link lands on the jobs.
    location.hash = "#/jobs";
    return;
  }
  markCurrent(path);
  const params = pattern.exec(path).slice(1);
  const said = flash;
  flash = null;
  const go = (to, message = null) => { flash = message; location.hash = to; };
  // The page is built apart and shown only if no newer navigation came while it loaded.
  const turn = ++turns;
  const view = h("div", {class: "view"});
  let stop = null;
  try {
    stop = await page.render(view, {me, allowed, params, go, flash: said}) || null;
  } catch (error) {
    if (error.status === 401) return; // signed out already: the sign-in page says why
    fill(view, h("h1", {}, "Something went wrong"), h("p", {class: "notice error", role: "alert"}, error.message));
  }
  if (turn !== turns || !me) {
    if (stop) stop();
    return;
  }
  cleanup = stop;
  fill(main, view);
  const heading = main.querySelector("h1");
  document.title = `${heading ? heading.textContent : "WMS"} - WMS console`;
  // A new page: move the focus to it, as a page load would (keyboard and screen-reader users).
  main.focus({preventScroll: true});
}

async function onSignedIn(token, who) {
  session.signIn(token);
  me = who;
  showNav();
  await route();
}

function signOut(reason) {
  turns += 1;
  session.signOut();
  me = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("who").hidden = true;
  if (cleanup) { cleanup(); cleanup = null; }
  signin.render(main, {onSignedIn, reason});
  document.title = "Sign in - WMS console";
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
whenUnauthorized((error) => signOut(`Signed out: ${error.message}`));
window.addEventListener("hashchange", route);

(async function start() {
  let said = null;
  try {
    const token = await oidc.finish();       // back from the identity provider's sign-in page
    if (token) {
      const who = await api("GET", "/whoami", undefined, token);
      session.signIn(token);
      me = who;
      showNav();
      await route();
      return;
    }
  } catch (error) {
    said = `Not signed in: ${error.message}`;
  }
  if (said) {
    signin.render(main, {onSignedIn, reason: said});
    return;
  }
  if (session.token()) {
    try {
      me = await api("GET", "/whoami");
      showNav();
    } catch (error) {
      session.signOut();
      me = null;
    }
  }
  await route();
})();
