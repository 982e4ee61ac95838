"""Every local device in one run: data parallelism over a jax.sharding.Mesh, the global batch split along it.

The step stays the one-device program: jax.jit's SPMD partitioner splits it once the inputs say how they are laid
out. The batch indices ([K, batch]) are split along the batch over the mesh's "data" axis, so each device
gathers and computes its share of every batch; the weights, optimizer slots, metric sums and device-resident
examples are replicated. The losses are ratios of sums over the global batch (pretrain/losses.py), so the
partitioner's all-reduces of the sums and of the gradients give the update of one device on the whole batch,
within float32 rounding of the reduction order (tests/test_data_parallel.py: 8 virtual CPU devices against 1).
`train_batch_size` is still the global batch; it must divide evenly over the devices.

The random draws are JAX's threefry with jax_threefry_partitionable (JAX's default): the same bits whatever the
sharding, so 8 devices draw the masks, samples and dropout of 1. XLA's RngBitGenerator ("rbg") makes no such
promise: on several devices the draws differ from one device's (the same distributions).
"""
from common.errors import InputError

DATA_AXIS = "data"


def choose_devices(count=None):
    """The first `count` local devices (default: all of them); InputError when fewer exist."""
    import jax

    devices = jax.local_devices()
    if count is None or count == 0:
        return devices
    if count < 1 or count > len(devices):
        raise InputError(f"--devices {count}: this process sees {len(devices)} local device(s) "
                         f"({devices[0].platform}); give a number from 1 to {len(devices)}")
    return devices[:count]


class Placement:
    """Where a run's arrays live: one device as before, or replicated over a mesh with the batch indices split."""

    def __init__(self, devices, batch_size):
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.devices = list(devices)
        if batch_size % len(self.devices):
            raise InputError(f"train_batch_size {batch_size} does not split evenly over {len(self.devices)} "
                             f"devices; give a batch that is a multiple of {len(self.devices)} or --devices "
                             "that divides it")
        if len(self.devices) == 1:  # the one-device program, unchanged
            self.mesh, self.replicated = None, self.devices[0]
            self.batch_indices = self.devices[0]
            return
        self.mesh = Mesh(np.array(self.devices), (DATA_AXIS,))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.batch_indices = NamedSharding(self.mesh, PartitionSpec(None, DATA_AXIS))  # [K, batch]
        if not jax.config.jax_threefry_partitionable:
            jax.config.update("jax_threefry_partitionable", True)  # the same draws as one device

    @property
    def count(self):
        return len(self.devices)

    def describe(self):
        device = self.devices[0]
        if self.count == 1:
            return f"{device.platform} {device.device_kind}"
        return f"{self.count} x {device.platform} {device.device_kind}, data parallel (mesh axis {DATA_AXIS!r})"

    def put(self, tree):
        """`tree` replicated (or on the one device)."""
        import jax

        return jax.device_put(tree, self.replicated)

    def put_indices(self, indices):
        """[K, batch] batch indices split along the batch."""
        import jax

        return jax.device_put(indices, self.batch_indices)
