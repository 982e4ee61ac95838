"""Which tf.distribute strategy a run uses.

--tpu → TPUStrategy; TF_CONFIG naming several workers → MultiWorkerMirroredStrategy; several local
GPUs → MirroredStrategy; otherwise the default strategy (CPU or one GPU).
"""
import json
import os

import tensorflow as tf


def tf_config_workers():
    """The number of tasks TF_CONFIG's cluster names (chief + workers), 0 when unset."""
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        return 0
    cluster = json.loads(text).get("cluster", {})
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def limit_cpu_inter_op_threads():
    """On a CPU-only host, one inter-op thread: with the intra-op pool using every core, a second
    inter-op thread oversubscribes them (measured 1.3-1.5x slower steps on 2 cores). Only possible before
    TensorFlow starts its runtime; later (e.g. a second run in one process) it is left as it is."""
    if tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"):
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass


def select_strategy(tpu=None):
    """The strategy for this process's hardware and environment (see the module docstring)."""
    if not tpu:
        limit_cpu_inter_op_threads()
    if tpu:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=None if tpu == "local" else tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if tf_config_workers() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def describe(strategy):
    kind = type(strategy).__name__
    if kind == "_DefaultDistributionStrategy":
        kind = "default strategy"
    elif isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        kind = "MultiWorkerMirroredStrategy"
    return f"{kind} with {strategy.num_replicas_in_sync} replica(s)"


def is_chief(strategy):
    """Whether this process writes the model folder (checkpoints, config, logs)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "chief" or (not has_chief and task_type == "worker" and task_id == 0)


def worker_id(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_id is None:
        return 0
    return int(resolver.task_id)


def device_kind():
    """"TPU", "GPU" or "CPU": what the step runs on (decides the XLA default)."""
    if tf.config.list_logical_devices("TPU"):
        return "TPU"
    if tf.config.list_logical_devices("GPU"):
        return "GPU"
    return "CPU"
