"""A stand-in for the Kubernetes API server's GET endpoints, over HTTPS, for the e2e tests.

  kapi_standin.py CERTDIR PORTFILE LOG TOKEN ROUTES.json

ROUTES maps a request path to [status, file]: the file's bytes are the body (a JSON object
as the API server serves it). A path not in ROUTES gets 404 with a Status body, as the API
server answers for an object or a version it does not have. A request without
"Authorization: Bearer TOKEN" gets 401. Each request is logged as one JSON line (method,
path, auth) to LOG. The server listens on 127.0.0.1, writes its port to PORTFILE and stops
after 120 s.

POST (an Event: `preflight watch`, tests/e2e/test_watch.sh) is answered 201 with the body it
carried, as the API server answers a create, and logged with that body ("body"); without the
token, 401.
"""
import json
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

certdir, portfile, log, token, routes_file = sys.argv[1:6]
routes = json.load(open(routes_file))


def status(code, reason, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Failure", "message": message, "reason": reason,
                       "code": code}).encode()


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        with open(log, "a") as f:
            f.write(json.dumps({"method": "GET", "path": self.path,
                                "auth": auth == "Bearer " + token}) + "\n")
        if auth != "Bearer " + token:
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        r = routes.get(self.path)
        if not r:
            return self.reply(404, status(404, "NotFound", "the server could not find the "
                                          "requested resource"))
        code, path = r
        if code != 200:
            return self.reply(code, status(code, "Forbidden", open(path).read().strip()))
        return self.reply(200, open(path, "rb").read())


    def do_POST(self):
        auth = self.headers.get("Authorization", "")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with open(log, "a") as f:
            f.write(json.dumps({"method": "POST", "path": self.path,
                                "auth": auth == "Bearer " + token,
                                "body": body.decode("utf-8", "replace")}) + "\n")
        if auth != "Bearer " + token:
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        return self.reply(201, body or b"{}")


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(certdir + "/server.crt", certdir + "/server.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
threading.Timer(120, srv.shutdown).start()
srv.serve_forever()
