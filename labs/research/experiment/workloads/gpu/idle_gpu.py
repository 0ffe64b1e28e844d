"""GPU suite: an idle GPU. A CUDA context is held and nothing runs on it."""

import os
import time

import torch

torch.zeros(1, device="cuda")
time.sleep(float(os.environ.get("SECS", "300")))
