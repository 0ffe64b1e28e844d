"""GPU suite: training. A small MLP trained on random batches for SECS seconds."""

import os
import time

import torch

secs = float(os.environ.get("SECS", "300"))
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
start = time.time()
while time.time() - start < secs:
    loss = model(torch.randn(256, 4096, device="cuda")).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
