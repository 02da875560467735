# A GAN-style script (written for devlint): a `cuda` flag decides every placement.
import torch
import torch.nn as nn

cuda = True if torch.cuda.is_available() else False
torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
discriminator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
adversarial_loss = nn.BCELoss()
if cuda:
    generator.cuda()
    discriminator.cuda()
    adversarial_loss.cuda()
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor

opt_g = torch.optim.Adam(generator.parameters(), lr=0.01)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=0.01)
for step in range(5):
    real = torch.randn(16, 2) + 2.0
    if cuda:
        real = real.cuda()
    valid = Tensor(16, 1).fill_(1.0)
    fake = Tensor(16, 1).fill_(0.0)
    z = torch.randn(16, 4)
    if cuda:
        z = z.cuda()
    g_loss = adversarial_loss(discriminator(generator(z)), valid)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    d_loss = adversarial_loss(discriminator(real), valid) + adversarial_loss(discriminator(generator(z).detach()), fake)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
print(g_loss.item(), d_loss.item())
