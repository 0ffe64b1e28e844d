"""GPU suite: generation. Token by token (batch 1, argmax), the launch-bound pattern of decoding."""

import os
import time

import torch

secs = float(os.environ.get("SECS", "300"))
embed = torch.nn.Embedding(32000, 1024).cuda()
head = torch.nn.Linear(1024, 32000).cuda()
token = torch.zeros(1, dtype=torch.long, device="cuda")
start = time.time()
with torch.no_grad():
    while time.time() - start < secs:
        token = head(embed(token)).argmax(-1)
