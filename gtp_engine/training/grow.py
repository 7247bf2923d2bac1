"""Grow: a deeper network that computes what a trained one computes, for training to go on from there.

Terms:
- identity block: a pre-activation residual block (model.ResidualBlock) whose last convolution is zero, so it
  returns its input: x + conv2(...) = x. Its other weights are freshly initialised; training moves conv2 off zero.
- growing: the trained network's stem, heads and residual blocks are copied into a network of a deeper config of
  the same width, heads and pooling sizes; the config's other blocks become identity blocks. The grown network's
  outputs equal the source's (to float rounding), so it starts at the source's strength instead of from random
  weights (Net2Net's deeper operator, Chen et al. 2016, for pre-activation blocks).
- placement: the source's blocks keep their order; a global pooling block goes to a pooling index of the target and
  a plain block to a plain one (their first convolutions differ in shape), each as early as it can go. A target
  pooling index no source block takes gets an identity block with pooling.
"""

from __future__ import annotations

import dataclasses

import torch

from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import model as model_lib

_SAME_FIELDS = ("channels", "pool_channels", "head_channels", "value_hidden", "spatial_channels", "global_features")


def placement(source: model_lib.ModelConfig, target: model_lib.ModelConfig) -> list[int]:
    """The target index of each source block (see the module docstring); ValueError when they cannot fit."""
    if target.blocks < source.blocks:
        raise ValueError(f"{target.name} has {target.blocks} blocks, fewer than {source.name}'s {source.blocks}")
    places, next_free = [], 0
    for i in range(source.blocks):
        pooling = i in source.pool_blocks
        j = next_free
        while j < target.blocks and (j in target.pool_blocks) != pooling:
            j += 1
        if j == target.blocks:
            kind = "global pooling" if pooling else "plain"
            raise ValueError(f"{source.name}'s block {i} ({kind}) has no place in {target.name}: its blocks "
                             f"{target.blocks}, pooling at {list(target.pool_blocks)}")
        places.append(j)
        next_free = j + 1
    return places


def grow(source: checkpoint_lib.Checkpoint, target: model_lib.ModelConfig, seed: int = 0) -> checkpoint_lib.Checkpoint:
    """A checkpoint of the `target` config computing what `source` computes (see the module docstring)."""
    for name in _SAME_FIELDS:
        if getattr(source.config, name) != getattr(target, name):
            raise ValueError(f"cannot grow {source.config.name} into {target.name}: {name} "
                             f"{getattr(source.config, name)} against {getattr(target, name)} (only depth grows)")
    places = placement(source.config, target)
    target = dataclasses.replace(target, opponent_policy=source.config.opponent_policy)
    with torch.random.fork_rng(devices=[]):  # the new blocks' draw leaves the caller's generator alone
        torch.manual_seed(seed)
        net = model_lib.build(target)
    grown = net.state_dict()
    moved = {f"blocks.{i}.": f"blocks.{j}." for i, j in enumerate(places)}
    for key, value in source.state_dict.items():
        if key.startswith("blocks."):
            prefix = ".".join(key.split(".")[:2]) + "."
            key = moved[prefix] + key[len(prefix):]
        if grown[key].shape != value.shape:
            raise ValueError(f"cannot grow {source.config.name} into {target.name}: {key} has shape "
                             f"{tuple(value.shape)} against {tuple(grown[key].shape)}")
        grown[key] = value.clone()
    kept = set(places)
    for j in range(target.blocks):
        if j not in kept:
            grown[f"blocks.{j}.conv2.weight"].zero_()
    net.load_state_dict(grown)
    provenance = dict(source.provenance)
    provenance["grown_from"] = {"config": source.config.name, "blocks_at": places}
    return checkpoint_lib.from_model(net, source.trained_sizes, provenance)
