"""Averaging: a network whose weights are the mean of several snapshots of one training run, with its batch norms
measured again on data (stochastic weight averaging, Izmailov et al. 2018; KataGo plays the averaged weights).

Terms:
- snapshot: a checkpoint of one training trajectory, such as the loop's consecutive candidates (each continues
  from the one before, its learning rate decaying to zero by its end). Only snapshots of one trajectory are
  averaged: the weights of unrelated runs do not line up, and their mean is no network at all.
- average: each floating-point tensor of the state dict is the mean of the snapshots' (equal weights); integer
  buffers (the norms' batch counts) are the last snapshot's. The snapshots sit around a valley of the loss that
  each one reaches only at its edge; their mean lies nearer its floor.
- recalibration: the mean of the weights is not the mean of the networks, so the averaged running statistics of
  the norms no longer describe what the averaged convolutions feed them. They are reset and measured again, as an
  exact mean over `batches` training batches (momentum None), in train mode and without gradients.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import torch

from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import dataset, runs

log = logging.getLogger(__name__)

RECALIBRATION_BATCHES = 100  # of the training batch size: 25,600 positions at 256, a few seconds on a CPU


def average(snapshots: Sequence[checkpoint_lib.Checkpoint]) -> checkpoint_lib.Checkpoint:
    """The mean of the snapshots' weights (see the module docstring), norms not yet recalibrated; provenance and
    trained sizes are the last snapshot's. ValueError for no snapshots or snapshots of different configs."""
    if not snapshots:
        raise ValueError("no snapshots to average")
    last = snapshots[-1]
    for snapshot in snapshots[:-1]:
        if snapshot.config != last.config:
            raise ValueError(f"cannot average a {snapshot.config.name} snapshot with a {last.config.name} one: "
                             f"only snapshots of one training run line up")
    state = {}
    for key, value in last.state_dict.items():
        if value.is_floating_point():
            state[key] = torch.stack([s.state_dict[key].float() for s in snapshots]).mean(dim=0).to(value.dtype)
        else:
            state[key] = value.clone()
    return checkpoint_lib.Checkpoint(config=last.config, state_dict=state, trained_sizes=list(last.trained_sizes),
                                     provenance=dict(last.provenance), features_version=last.features_version)


def recalibrate_norms(net: torch.nn.Module, shards: dataset.Shards, batches: int, batch_size: int, seed: int = 0,
                      device: torch.device | str = "cpu") -> int:
    """Measures the running statistics of net's batch norms again on `batches` batches of `shards` (a random
    symmetry each); returns the number of positions seen. net is left in eval mode."""
    norms = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # None: an exact cumulative mean over the batches, not an exponential one
    net.train()
    seen = 0
    try:
        with torch.no_grad():
            for count, batch in enumerate(shards.batches(batch_size, seed)):
                if count == batches:
                    break
                spatial, global_, _ = dataset.expand(dataset.to_device(batch, device), shards.height, shards.width)
                net(spatial, global_)
                seen += len(batch["move"])
    finally:
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum
        net.eval()
    return seen


def average_snapshots(paths: Sequence[str | os.PathLike], data: Sequence[str | os.PathLike],
                      batches: int = RECALIBRATION_BATCHES, batch_size: int = 256, seed: int = 0,
                      device: str = "auto") -> checkpoint_lib.Checkpoint:
    """The averaged checkpoint of the snapshot files, its norms recalibrated on the training split of the shard
    folders `data`; its provenance names the snapshots (CheckpointError for a bad file, DatasetError for bad data)."""
    snapshots = [checkpoint_lib.load(path) for path in paths]
    averaged = average(snapshots)
    torch_device = runs.device(device)
    net = averaged.build_model().to(torch_device)
    seen = recalibrate_norms(net, dataset.Shards(data, "train"), batches, batch_size, seed, torch_device)
    provenance = {**averaged.provenance, "averaged": [str(path) for path in paths], "norms_recalibrated_on": seen}
    log.info("averaged %d snapshots (%s), norms recalibrated on %d positions", len(paths),
             ", ".join(str(p) for p in paths), seen)
    return checkpoint_lib.from_model(net.cpu(), averaged.trained_sizes, provenance)
