"""Model: the policy/value network in torch, built from a named preset.

Terms:
- preset: a named ModelConfig, "b<blocks>c<channels>" (b6c64, b8c64, b10c64, b6c96, b10c128) or "tiny" (tests
  only). b8c64 and b10c64 are b6c64 made deeper, with room for its blocks (grow.py).
- trunk: a 3x3 stem (plus the global inputs, mapped to a per-channel bias) followed by pre-activation residual
  blocks; some blocks are global pooling blocks, which pool part of their first convolution over the board and
  feed it back as a per-channel bias, so a position's far side can inform every point.
- mask: the on-board plane (features channel 0). Every spatial output is multiplied by it, and pooling averages
  only over it, so the network is fully convolutional: trained on one size, it runs on another, and a smaller
  board zero-padded into a larger tensor gives the same answer.
- pooling: for channels x over a board of A points: mean, mean * (sqrt(A) - 14) / 10 (lets the net scale with
  board size), and max (inputs are non-negative, after a ReLU).
- heads (the ONNX contract, names in OUTPUTS):
  policy    [N, H*W + 1] logits, flat order, pass last; off-board points get -1e4;
  value     [N, 3] logits of (win, loss, draw) for the side to move;
  score     [N] lead of the side to move in points;
  ownership [N, H, W] tanh, +1 owned by the side to move, 0 off the board.
- parts: the trunk (stem to trunk_norm), the policy head (policy, pass and opponent outputs) and the value head
  (value, score and ownership, which share its first convolution); PARTS names them, part_of(parameter name)
  tells a parameter's, and train_parts() puts a network in training mode with only some parts learning.
- opponent policy (KataGo's auxiliary target, ModelConfig.opponent_policy): a second output of the policy head,
  logits like policy's for the opponent's reply to the move played. It only trains the trunk and the policy head:
  forward(..., opponent=True) returns it as a fifth output, and the ONNX export (the default forward) leaves it
  out, so the contract above holds whether a network has it or not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from gtp_engine import features

INPUTS = ("spatial", "global")
OUTPUTS = ("policy", "value", "score", "ownership")
SCORE_SCALE = 20.0  # the score head works in units of 20 points
OFF_BOARD_LOGIT = -1e4


@dataclass(frozen=True)
class ModelConfig:
    name: str
    blocks: int
    channels: int
    pool_blocks: tuple[int, ...]  # indices of the global pooling blocks
    pool_channels: int  # channels pooled inside a global pooling block
    head_channels: int
    value_hidden: int
    spatial_channels: int = features.SPATIAL_CHANNELS
    global_features: int = features.GLOBAL_FEATURES
    opponent_policy: bool = False  # the auxiliary opponent-reply output of the policy head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown model config fields: {sorted(unknown)}")
        values = dict(data)
        values["pool_blocks"] = tuple(values["pool_blocks"])
        return cls(**values)


PRESETS = {
    config.name: config
    for config in (
        ModelConfig("tiny", blocks=2, channels=16, pool_blocks=(1,), pool_channels=8, head_channels=8,
                    value_hidden=16),
        ModelConfig("b6c64", blocks=6, channels=64, pool_blocks=(2, 4), pool_channels=16, head_channels=32,
                    value_hidden=64),
        ModelConfig("b8c64", blocks=8, channels=64, pool_blocks=(3, 5), pool_channels=16, head_channels=32,
                    value_hidden=64),
        ModelConfig("b10c64", blocks=10, channels=64, pool_blocks=(3, 6, 8), pool_channels=16, head_channels=32,
                    value_hidden=64),
        ModelConfig("b6c96", blocks=6, channels=96, pool_blocks=(2, 4), pool_channels=32, head_channels=32,
                    value_hidden=96),
        ModelConfig("b10c128", blocks=10, channels=128, pool_blocks=(3, 6, 8), pool_channels=32, head_channels=32,
                    value_hidden=128),
    )
}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, C, H, W] (non-negative, zero off the board) -> [N, 3C]: mean, size-scaled mean, max over the mask."""
    area = mask.sum(dim=(2, 3))  # [N, 1]
    mean = x.sum(dim=(2, 3)) / area
    scaled = mean * (torch.sqrt(area) - 14.0) / 10.0
    peak = x.amax(dim=(2, 3))
    return torch.cat([mean, scaled, peak], dim=1)


def _conv(cin: int, cout: int, size: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, size, padding=size // 2, bias=False)


class ResidualBlock(nn.Module):
    """Pre-activation: x + conv(relu(bn(conv(relu(bn(x)))))); with pooling, part of the first convolution is
    pooled and added back as a bias to the rest."""

    def __init__(self, channels: int, pool_channels: int = 0):
        super().__init__()
        self.pool_channels = pool_channels
        self.norm1 = nn.BatchNorm2d(channels)
        self.conv1 = _conv(channels, channels - pool_channels, 3)
        if pool_channels:
            self.conv_pool = _conv(channels, pool_channels, 3)
            self.norm_pool = nn.BatchNorm2d(pool_channels)
            self.pool_bias = nn.Linear(3 * pool_channels, channels - pool_channels)
        self.norm2 = nn.BatchNorm2d(channels - pool_channels)
        self.conv2 = _conv(channels - pool_channels, channels, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm1(x)) * mask
        out = self.conv1(h)
        if self.pool_channels:
            g = F.relu(self.norm_pool(self.conv_pool(h))) * mask
            out = out + self.pool_bias(pool(g, mask))[:, :, None, None]
        out = F.relu(self.norm2(out)) * mask
        return x + self.conv2(out) * mask


class GoNet(nn.Module):
    """Inputs spatial [N, C, H, W] and global [N, G]; outputs (policy, value, score, ownership) as documented."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        c, hc = config.channels, config.head_channels
        self.stem = _conv(config.spatial_channels, c, 3)
        self.stem_global = nn.Linear(config.global_features, c, bias=False)
        self.blocks = nn.ModuleList(
            ResidualBlock(c, config.pool_channels if i in config.pool_blocks else 0) for i in range(config.blocks)
        )
        self.trunk_norm = nn.BatchNorm2d(c)
        # policy head
        self.policy_conv = _conv(c, hc, 1)
        self.policy_pool_conv = _conv(c, hc, 1)
        self.policy_pool_norm = nn.BatchNorm2d(hc)
        self.policy_pool_bias = nn.Linear(3 * hc, hc)
        self.policy_norm = nn.BatchNorm2d(hc)
        self.policy_out = _conv(hc, 1, 1)
        self.pass_out = nn.Linear(3 * hc, 1)
        if config.opponent_policy:
            self.opponent_out = _conv(hc, 1, 1)
            self.opponent_pass_out = nn.Linear(3 * hc, 1)
        # value, score and ownership heads
        self.value_conv = _conv(c, hc, 1)
        self.value_norm = nn.BatchNorm2d(hc)
        self.value_hidden = nn.Linear(3 * hc, config.value_hidden)
        self.value_out = nn.Linear(config.value_hidden, 4)  # win, loss, draw logits and score
        self.ownership_out = _conv(hc, 1, 1)

    def forward(self, spatial: torch.Tensor, global_: torch.Tensor, opponent: bool = False):
        """(policy, value, score, ownership), and the opponent policy after them when `opponent` (which needs a
        network built with it)."""
        if opponent and not self.config.opponent_policy:
            raise ValueError(f"this {self.config.name} network has no opponent policy output")
        mask = spatial[:, :1]
        x = (self.stem(spatial) + self.stem_global(global_)[:, :, None, None]) * mask
        for block in self.blocks:
            x = block(x, mask)
        trunk = F.relu(self.trunk_norm(x)) * mask

        g = F.relu(self.policy_pool_norm(self.policy_pool_conv(trunk))) * mask
        pooled = pool(g, mask)
        p = self.policy_conv(trunk) + self.policy_pool_bias(pooled)[:, :, None, None]
        p = F.relu(self.policy_norm(p)) * mask
        board_logits = self.policy_out(p) * mask + (1.0 - mask) * OFF_BOARD_LOGIT
        policy = torch.cat([board_logits.flatten(1), self.pass_out(pooled)], dim=1)
        if opponent:
            board_logits = self.opponent_out(p) * mask + (1.0 - mask) * OFF_BOARD_LOGIT
            opponent_policy = torch.cat([board_logits.flatten(1), self.opponent_pass_out(pooled)], dim=1)

        v = F.relu(self.value_norm(self.value_conv(trunk))) * mask
        head = self.value_out(F.relu(self.value_hidden(pool(v, mask))))
        value = head[:, :3]
        score = head[:, 3] * SCORE_SCALE
        ownership = torch.tanh(self.ownership_out(v)[:, 0]) * mask[:, 0]
        if opponent:
            return policy, value, score, ownership, opponent_policy
        return policy, value, score, ownership


PARTS = ("trunk", "policy", "value")
_PART_PREFIXES = {"trunk": ("stem", "blocks.", "trunk_norm."), "policy": ("policy_", "pass_out.", "opponent_"),
                  "value": ("value_", "ownership_out.")}


def part_of(name: str) -> str:
    """The part ("trunk", "policy" or "value") of the parameter or module with this name in GoNet."""
    for part, prefixes in _PART_PREFIXES.items():
        if name.startswith(prefixes):
            return part
    raise ValueError(f"{name!r} belongs to no part of the network")


def train_parts(net: GoNet, parts: tuple[str, ...]) -> list[nn.Parameter]:
    """Training mode for `parts` alone: their parameters require gradients (returned, for the optimizer); the other
    parts' parameters do not, and their norms stay in eval mode, so they compute exactly what they did."""
    unknown = set(parts) - set(PARTS)
    if unknown or not parts:
        raise ValueError(f"parts must be some of {PARTS}, got {parts}")
    net.train()
    for name, module in net.named_children():
        module.train(part_of(name + ".") in parts)
    learning = []
    for name, parameter in net.named_parameters():
        parameter.requires_grad_(part_of(name) in parts)
        if parameter.requires_grad:
            learning.append(parameter)
    return learning


def build(config: ModelConfig | str) -> GoNet:
    return GoNet(preset(config) if isinstance(config, str) else config)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_position(config: ModelConfig, width: int, height: int) -> float:
    """Multiply-adds x 2 of the trunk convolutions, the bulk of the cost; for benchmarks and model cards."""
    area = width * height
    per_block = 2 * 9 * config.channels * config.channels
    return 2.0 * area * (9 * config.spatial_channels * config.channels + config.blocks * per_block)

