"""Every local device in one run: data parallelism over a jax.sharding.Mesh, the global batch split along it.

The step stays the one-device program: jax.jit's SPMD partitioner splits it once the inputs say how they are laid
out. The batch indices ([K, batch]) are split along the batch over the mesh's "data" axis, so each device
gathers and computes its share of every batch; the weights, optimizer slots, metric sums and device-resident
examples are replicated. The losses are ratios of sums over the global batch (pretrain/losses.py), so the
partitioner's all-reduces of the sums and of the gradients give the update of one device on the whole batch,
within float32 rounding of the reduction order (tests/test_data_parallel.py: 8 virtual CPU devices against 1).
`train_batch_size` is still the global batch; it must divide evenly over the devices.

Several hosts: one process per host (`initialize_processes`, jax.distributed), the mesh over every process's
devices. Each process holds the same examples and draws the same batch indices (the same seed), and gives the mesh
only its own devices' share of every batch; the replicated results are read from its own copy. Only process 0
writes the model folder; the others keep their own resumable state (tests/test_data_parallel.py: two processes of
4 virtual CPU devices against one of 8).

The random draws are JAX's threefry with jax_threefry_partitionable (JAX's default): the same bits whatever the
sharding, so 8 devices draw the masks, samples and dropout of 1. XLA's RngBitGenerator ("rbg") makes no such
promise: on several devices the draws differ from one device's (the same distributions).
"""
from common.errors import InputError

DATA_AXIS = "data"


ENVIRONMENT = {"coordinator_address": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
               "process_id": "JAX_PROCESS_ID"}


def initialize_processes(coordinator_address=None, num_processes=None, process_id=None):
    """jax.distributed.initialize for a run over several processes (hosts), from the arguments or else the
    environment's JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID; nothing for one process. Before
    anything asks JAX for its devices. Returns the number of processes."""
    import os

    given = {"coordinator_address": coordinator_address, "num_processes": num_processes, "process_id": process_id}
    for name, variable in ENVIRONMENT.items():
        if given[name] is None and os.environ.get(variable):
            given[name] = os.environ[variable] if name == "coordinator_address" else int(os.environ[variable])
    if not given["num_processes"] or given["num_processes"] == 1:
        return 1
    missing = [f"--{name.replace('_', '-')}" for name, value in given.items() if value is None]
    if missing:
        raise InputError(f"--num-processes {given['num_processes']}: give {' and '.join(missing)} too (or "
                         f"{', '.join(ENVIRONMENT[m[2:].replace('-', '_')] for m in missing)})")
    if not 0 <= given["process_id"] < given["num_processes"]:
        raise InputError(f"--process-id {given['process_id']}: give one from 0 to {given['num_processes'] - 1}")
    import jax

    jax.distributed.initialize(**given)
    return given["num_processes"]


def choose_devices(count=None):
    """The first `count` local devices (default: all of them; over several processes, every process's); an
    InputError when fewer exist."""
    import jax

    if jax.process_count() > 1:
        if count:
            raise InputError("--devices: over several processes the run uses every device of every process")
        return jax.devices()
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

    @property
    def processes(self):
        return len({device.process_index for device in self.devices})

    def describe(self):
        device = self.devices[0]
        if self.count == 1:
            return f"{device.platform} {device.device_kind}"
        hosts = f" over {self.processes} processes" if self.processes > 1 else ""
        return (f"{self.count} x {device.platform} {device.device_kind}{hosts}, data parallel (mesh axis "
                f"{DATA_AXIS!r})")

    def put(self, tree):
        """`tree` replicated (or on the one device)."""
        return self._put(tree, self.replicated)

    def put_indices(self, indices):
        """[K, batch] batch indices split along the batch."""
        return self._put(indices, self.batch_indices)

    def rows(self, axis=0):
        """The sharding of arrays whose `axis` is the batch's rows: split along it over the mesh (or the one
        device). Fine-tuning's batches ([rows, ...], a block's [K, rows, ...]) travel whole, not as indices."""
        if self.mesh is None:
            return self.replicated
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec(*[None] * axis, DATA_AXIS))

    def put_rows(self, tree, axis=0):
        """`tree`'s arrays split along their rows (`axis`) over the mesh."""
        return self._put(tree, self.rows(axis))

    def _put(self, tree, sharding):
        import jax
        import numpy as np

        if self.processes == 1:
            return jax.device_put(tree, sharding)

        def global_array(value):  # every process holds the whole value and gives its own devices their share
            value = np.asarray(value)
            return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

        return jax.tree_util.tree_map(global_array, tree)

    def fetch(self, tree):
        """`tree`'s values on the host: over several processes, from this process's own replica."""
        import jax
        import numpy as np

        if self.processes == 1:
            return jax.device_get(tree)
        return jax.tree_util.tree_map(lambda value: np.asarray(value.addressable_data(0)), tree)
