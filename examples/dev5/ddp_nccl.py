# A one-process DDP script (written for devlint): nccl, set_device, memory statistics.
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
use_cuda = torch.cuda.is_available()
if use_cuda:
    torch.cuda.set_device(local_rank)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)

torch.manual_seed(0)
model = nn.Linear(10, 4).to(device)
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
data = torch.randn(8, 10).to(device)
target = torch.randn(8, 4).to(device)
for step in range(5):
    loss = nn.functional.mse_loss(ddp(data), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
if use_cuda:
    torch.cuda.synchronize()
    used = torch.cuda.memory_allocated() >= 0
print(loss.item())
dist.destroy_process_group()
