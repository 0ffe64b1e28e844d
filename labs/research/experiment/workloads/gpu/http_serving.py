"""GPU suite: HTTP serving. Each GET runs a small batch on the GPU; idle between requests."""

import http.server

import torch

model = torch.nn.Linear(1024, 1024).cuda()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        model(torch.randn(64, 1024, device="cuda"))
        torch.cuda.synchronize()
        self.send_response(200)
        self.end_headers()


http.server.ThreadingHTTPServer(("", 8000), Handler).serve_forever()
