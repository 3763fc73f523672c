"""LEAF's character LSTM for Shakespeare (Caldas et al. 2018, ``models/shakespeare/stacked_lstm.py``):
embedding of 8, two LSTM layers of 256, a linear layer from the last step's output to the 80 characters.

Input: int64 character indices of shape (batch, sequence length); ``num_classes`` is the vocabulary
size (80 for LEAF). 819,920 parameters with 80 characters (PyTorch's LSTM has two bias vectors per
gate where TensorFlow's has one: LEAF's TensorFlow model has 817,872).
"""

from __future__ import annotations

from typing import cast

import torch
from pydantic import Field
from torch import nn

from fedgc.models.base import NoOptions


class CharLSTMOptions(NoOptions):
    embedding_dim: int = Field(8, ge=1)
    hidden_size: int = Field(256, ge=1)
    num_layers: int = Field(2, ge=1)


class CharLSTM(nn.Module):
    Options = CharLSTMOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, embedding_dim: int = 8, hidden_size: int = 256,
                 num_layers: int = 2) -> None:
        super().__init__()
        if len(input_shape) != 1:
            raise ValueError(f"char_lstm expects character sequences of shape (length,), got {input_shape}")
        self.embedding = nn.Embedding(num_classes, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(x))
        return cast(torch.Tensor, self.head(out[:, -1, :]))  # nn.Module.__call__ is typed Any
