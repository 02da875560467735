"""A small training script whose device bugs all cross a function boundary, the way the
reports show them: the evaluation helper never moves its batches, the model is handed
through `fit` to `train_epoch` without being moved, a regulariser adds an identity
matrix built on the CPU to a GPU matrix, and the features a generator yields are turned
into NumPy while still on the GPU. It runs on a CPU and fails on the first GPU."""

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

inputs = torch.randn(64, 6)
labels = (inputs[:, 0] > 0).long()
train_loader = DataLoader(TensorDataset(inputs, labels), batch_size=16)
test_loader = DataLoader(TensorDataset(inputs[:32], labels[:32]), batch_size=16)


def orthogonality(w):
    n = w.shape[0]
    return ((w @ w.t() - torch.eye(n)) ** 2).sum()


def train_epoch(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y) + 1e-3 * orthogonality(model.weight)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total


def fit(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return [train_epoch(model, loader, optimizer) for _ in range(epochs)]


def evaluate(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct


def features(model, loader):
    with torch.no_grad():
        for x, _ in loader:
            yield model(x.to(device)), x.shape[0]


net = nn.Linear(6, 2)
print("losses", fit(net, train_loader, 3))
print("correct", evaluate(net, test_loader))
for scores, count in features(net, test_loader):
    print(count, np.round(scores.numpy(), 4))
