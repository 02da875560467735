# An MNIST-style script (written for devlint): `use_cuda`/`use_mps` flags, a device chain, `cuda_kwargs`.
import argparse
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
parser.add_argument("--no-mps", action="store_true")
args = parser.parse_args([])
use_cuda = not args.no_cuda and torch.cuda.is_available()
use_mps = not args.no_mps and torch.backends.mps.is_available()
torch.manual_seed(0)
if use_cuda:
    device = torch.device("cuda")
elif use_mps:
    device = torch.device("mps")
else:
    device = torch.device("cpu")
train_kwargs = {"batch_size": 16}
if use_cuda:
    cuda_kwargs = {"num_workers": 0, "pin_memory": True, "shuffle": False}
    train_kwargs.update(cuda_kwargs)
data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
loader = DataLoader(data, **train_kwargs)
model = nn.Linear(8, 3)
if use_cuda:
    model.cuda()
else:
    model.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
