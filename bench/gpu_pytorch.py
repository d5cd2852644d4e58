"""The seeds' CNN training step in PyTorch eager, as bench/gpu's baseline.

Two figures per batch size, each the median of many steps after a warm-up,
with the device synchronised at the end of every step:
  with_transfers: what a parameter-server worker does each step (parameters
    copied up from pinned host memory, forward, backward, gradients copied
    down to pinned host memory), the same work as Troupe's GPU worker step;
  compute_only: forward and backward on parameters already on the device.
Prints: pytorch batch=B with_transfers_ms=M compute_only_ms=C
"""
import argparse
import statistics
import time

import torch
import torch.profiler
import torch.nn as nn
import torch.nn.functional as F


class DeepNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.fc1(x.flatten(1))), 0.5, self.training)
        return self.fc2(x)


def median_ms(step, steps):
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def profile(step, batch, steps=10):
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    print(f"pytorch batch={batch}: CUDA time per compute step, by kernel ({steps} steps)")
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total > 0:
            print(f"  {e.device_time_total / steps:9.1f} us  x{e.count // steps:<3d} {e.key[:110]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--batch", type=int, help="this batch size alone")
    parser.add_argument("--profile", action="store_true",
                        help="print each CUDA kernel's time per compute step instead")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32, as Troupe computes
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    for batch in ([args.batch] if args.batch else (100, 1024)):
        model = DeepNN().to(device).train()
        params = list(model.parameters())
        host_params = [p.detach().cpu().pin_memory() for p in params]
        host_grads = [torch.empty_like(h).pin_memory() for h in host_params]
        x = torch.rand(batch, 1, 28, 28, device=device)
        y = torch.arange(batch, device=device) % 10

        def compute():
            for p in params:
                p.grad = None
            F.cross_entropy(model(x), y).backward()

        def with_transfers():
            with torch.no_grad():
                for p, h in zip(params, host_params):
                    p.copy_(h, non_blocking=True)
            compute()
            for p, h in zip(params, host_grads):
                h.copy_(p.grad, non_blocking=True)

        if args.profile:
            profile(compute, batch)
            continue
        print(f"pytorch batch={batch} "
              f"with_transfers_ms={median_ms(with_transfers, args.steps):.4f} "
              f"compute_only_ms={median_ms(compute, args.steps):.4f}", flush=True)


if __name__ == "__main__":
    main()
