// Preloaded into Node MCP servers started by the tests (node --require
// scripts/bind-localhost.cjs ...): @modelcontextprotocol/server-everything listens on
// every interface, and tests may only use loopback. Any listen() on a TCP port is
// pinned to 127.0.0.1.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    if (first.path === undefined) args[0] = Object.assign({}, first, { host: "127.0.0.1" });
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] === "string") args[1] = "127.0.0.1";
    else args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
