// The guest of host.mjs: koffi's module start-up, and one library loaded.
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const koffi = require("koffi");
koffi.load("libc.so.6");
