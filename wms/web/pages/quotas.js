import {h, fill} from "../dom.js";
export function render(main) { fill(main, h("h1", {}, "quotas")); }
