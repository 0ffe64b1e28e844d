"""GPU suite: batch inference. Large batches through a linear layer for SECS seconds."""

import os
import time

import torch

secs = float(os.environ.get("SECS", "300"))
model = torch.nn.Linear(4096, 4096).cuda().eval()
start = time.time()
with torch.no_grad():
    while time.time() - start < secs:
        model(torch.randn(1024, 4096, device="cuda"))
        torch.cuda.synchronize()
