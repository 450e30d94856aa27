// The console speaks /api/v1 like any other client: a bearer token on every
// call, the API's one error shape ({"detail": ...}) shown as it comes.

const KEY = "wms.token"; // sessionStorage: gone when the browser session ends

export const session = {
  token: () => sessionStorage.getItem(KEY),
  signIn: (token) => sessionStorage.setItem(KEY, token),
  signOut: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

/** The API's base, found from this page's address (/ui/ -> /api/v1), so a proxy prefix carries over. */
const BASE = new URL("../api/v1", document.baseURI).pathname;

/** Called with the error when the server no longer accepts the token (401). */
let onUnauthorized = () => {};
export function whenUnauthorized(callback) { onUnauthorized = callback; }

export async function api(method, path, body, token = session.token()) {
  return (await send(method, path, body, token)).document;
}

/** One page of a paged list: {rows, next}, next being the cursor of the page after (null: the last page). */
export async function getPage(path) {
  const {document, response} = await send("GET", path);
  return {rows: document, next: response.headers.get("X-Next-Cursor")};
}

async function send(method, path, body, token = session.token()) {
  const headers = {Accept: "application/json"};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(BASE + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (error) {
    throw new ApiError(0, `the server cannot be reached (${error.message})`);
  }
  if (response.status === 204) return {document: null, response};
  const text = await response.text();
  let document = null;
  try { document = text ? JSON.parse(text) : null; } catch { /* not JSON: shown as text below */ }
  if (!response.ok) {
    const detail = document && document.detail ? String(document.detail) : `${response.status} ${response.statusText}`;
    const error = new ApiError(response.status, detail);
    if (response.status === 401 && token === session.token()) onUnauthorized(error);
    throw error;
  }
  return {document, response};
}

export const get = (path) => api("GET", path);

/** Save a file the API serves (a sandbox file) under ``name``: fetched with the
    token (a plain link could not carry it), handed to the browser as a download. */
export async function download(path, name) {
  let response;
  try {
    response = await fetch(BASE + path, {headers: {Authorization: `Bearer ${session.token()}`}});
  } catch (error) {
    throw new ApiError(0, `the server cannot be reached (${error.message})`);
  }
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try { detail = (await response.json()).detail || detail; } catch { /* not the error shape */ }
    throw new ApiError(response.status, detail);
  }
  const url = URL.createObjectURL(await response.blob());
  const link = Object.assign(document.createElement("a"), {href: url, download: name});
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

/** A query string from {name: value or [values]}, leaving out empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of [].concat(value ?? [])) if (one !== "" && one !== null) search.append(name, one);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** Where an error points in a text sent as `source`: {line, column (null when not given), text} from "source:LINE[:COL]: ...", or null. */
export function errorPosition(detail, source) {
  const escaped = source.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const match = new RegExp(`${escaped}:(\\d+)(?::(\\d+))?`).exec(detail);
  return match ? {line: Number(match[1]), column: match[2] ? Number(match[2]) : null, text: match[0]} : null;
}
