"""Distributed: the loop's work (loop.py) on Ray actors, across the machines of a Ray cluster.

Terms:
- replay store: the run folder, on storage that every machine mounts at the same path (NFS, a cluster file
  system; on one machine any folder). Self-play workers write their shard folders into it, one per batch; the
  trainer reads the window of recent generations from it; the driver (the process running the loop) keeps
  state.json there. Nothing else passes between machines but small job descriptions and reports.
- self-play worker: an actor holding one CPU that plays batches of games (loop.run_selfplay) with the best
  network read from the store, and plays gate matches (loop.run_gate). A generation's batches are spread over
  all workers; the gate match runs on one.
- trainer: one actor that trains the candidates (loop.run_train), on a GPU when the cluster has one. The loop is
  synchronous (training waits for the generation's self-play and the next self-play for the gate), so the
  trainer reserves no CPU: it never runs while the workers do.
- resumption is the loop's: a worker that dies leaves a batch without report.json, which the rerun plays again.

Every machine needs this package with the train and ray extras (pip install "gtp_engine[train,ray]"); the
driver joins the cluster at --ray-address (none: a local cluster of this machine's CPUs).
"""

from __future__ import annotations

import dataclasses
import logging
import os

import ray
from ray.util import ActorPool

from gtp_engine.training import gating, loop, train

log = logging.getLogger(__name__)


@ray.remote(num_cpus=1)
class SelfPlayWorker:
    def selfplay(self, job: loop.SelfPlayJob) -> dict:
        return loop.run_selfplay(job, progress=False)

    def gate(self, job: loop.GateJob) -> gating.GateResult:
        return loop.run_gate(job, progress=False)


@ray.remote(num_cpus=0)
class Trainer:
    def __init__(self, threads: int):
        import torch

        if threads:
            torch.set_num_threads(threads)

    def train(self, config: train.TrainConfig, run_dir: str) -> dict:
        return loop.run_train(config, run_dir, progress=False)


class RayRunner:
    """loop.Runner on Ray actors: `workers` self-play workers and one trainer."""

    def __init__(self, workers: int, address: str | None = None, train_threads: int = 0):
        if workers < 1:
            raise ValueError("--workers must be at least 1")
        self._started = not ray.is_initialized()
        if self._started:
            ray.init(address=address or None, include_dashboard=False, logging_level=logging.WARNING,
                     num_cpus=None if address else max(workers, os.cpu_count() or 1))
        gpus = ray.cluster_resources().get("GPU", 0)
        self.workers = [SelfPlayWorker.remote() for _ in range(workers)]
        self.trainer = Trainer.options(num_gpus=1 if gpus >= 1 else 0).remote(train_threads)
        log.info("ray: %d self-play workers, trainer on %s (cluster: %s)", workers, "a GPU" if gpus else "a CPU",
                 ray.cluster_resources())

    def selfplay(self, jobs: list[loop.SelfPlayJob]) -> list[dict]:
        pool = ActorPool(self.workers)
        jobs = [_one_core(job) for job in jobs]
        return list(pool.map(lambda worker, job: worker.selfplay.remote(job), jobs))

    def train(self, config: train.TrainConfig, run_dir: str) -> dict:
        return ray.get(self.trainer.train.remote(config, run_dir))

    def gate(self, job: loop.GateJob) -> gating.GateResult:
        return ray.get(self.workers[0].gate.remote(_one_core(job)))

    def close(self) -> None:
        for actor in self.workers + [self.trainer]:
            ray.kill(actor)
        if self._started:
            ray.shutdown()


def _one_core(job: loop.SelfPlayJob | loop.GateJob) -> loop.SelfPlayJob | loop.GateJob:
    """A job for a worker that holds one CPU: one onnxruntime thread, and no pipelining (its overlap of search and
    network needs a second core)."""
    job = dataclasses.replace(job, config=dataclasses.replace(job.config, evaluation_threads=0))
    return loop.with_threads(job, job.engine.threads or 1)
