"""A sequence tagger placed with the script's own CUDA flag, the way older tutorials do
it: the model moves under `if use_cuda:`, but the batch, the targets and the GRU's initial
hidden state are built on the CPU, and the probabilities go to NumPy from the GPU. The
fixes follow the flag, so on a Mac (no CUDA) everything stays on the CPU together."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
use_cuda = torch.cuda.is_available()


class Tagger(nn.Module):
    def __init__(self, features, hidden, tags):
        super().__init__()
        self.hidden = hidden
        self.rnn = nn.GRU(features, hidden)
        self.out = nn.Linear(hidden, tags)

    def forward(self, x, h=None):
        if h is None:
            h = torch.zeros(1, x.size(1), self.hidden)
        out, h = self.rnn(x, h)
        return self.out(out), h


model = Tagger(4, 8, 3)
if use_cuda:
    model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

sequence = torch.randn(5, 2, 4)
targets = torch.randint(0, 3, (5, 2))
for step in range(3):
    optimizer.zero_grad()
    logits, _ = model(sequence)
    loss = F.cross_entropy(logits.view(-1, 3), targets.view(-1))
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 5))

probs = torch.softmax(logits, dim=-1).detach()
print(probs.numpy().round(4))
