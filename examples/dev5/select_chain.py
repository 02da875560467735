# A device chosen per backend (written for devlint): cuda, mps, xpu, then the CPU.
import torch
import torch.nn as nn

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
elif torch.xpu.is_available():
    device = torch.device("xpu")
else:
    device = torch.device("cpu")
backend = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
opt = torch.optim.Adam(net.parameters(), lr=0.01)
x = torch.randn(32, 6).to(device)
y = x.sum(dim=1, keepdim=True)
for step in range(20):
    loss = ((net(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(backend != "", loss.item())
