"""KernelBench-style problem: the sum of each row of a float32 matrix, torch.sum(x, dim=1). The rows of the
problem are a multiple of 4 floats long, so a kernel may read them as float4s; the harness's second shape,
(1025, 8193), is not: a kernel that refuses it with a TORCH_CHECK is limited, one that gets it wrong is
rejected (bench/problems/README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


batch_size = 2048
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
