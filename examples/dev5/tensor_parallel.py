# A tensor-parallel-style script (written for devlint): `device_type="cuda"` from a check.
import torch
import torch.nn as nn

device_type = "cuda" if torch.cuda.is_available() else "cpu"
device = torch.device(device_type)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
x = torch.randn(4, 8).to(device)
for step in range(5):
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=False):
        out = model(x)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
