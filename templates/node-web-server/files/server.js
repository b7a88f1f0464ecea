// A tiny HTTP server without dependencies: `node server.js` (PORT, default 3000).
const http = require("http");
const fs = require("fs");
const path = require("path");

const port = Number(process.env.PORT || 3000);

function json(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  if (req.url === "/health") return json(res, 200, { status: "ok", uptime: process.uptime() });
  if (req.url.startsWith("/echo")) {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => json(res, 200, { method: req.method, url: req.url, body }));
    return;
  }
  if (req.url === "/" || req.url === "/index.html") {
    res.writeHead(200, { "Content-Type": "text/html" });
    return fs.createReadStream(path.join(__dirname, "public", "index.html")).pipe(res);
  }
  json(res, 404, { error: "not found" });
});

server.listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}`));
