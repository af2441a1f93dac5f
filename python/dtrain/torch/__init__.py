"""dtrain.torch: torch.distributed's backend "dtrain" on dtrain's collectives (see dtrain-torch(7)).

    import torch.distributed as dist
    import dtrain.torch                        # registers the backend "dtrain"

    dist.init_process_group("dtrain")          # env:// (dtrain launch, torchrun), or file://, tcp://
    dist.all_reduce(t)                         # shared memory within a host, TCP across hosts

Every process group (the world, each new_group) is its own dtrain communicator, bootstrapped through
the store torch hands that group; its ops run in issue order on the group's own thread and return
torch Work objects (wait(), is_completed(), get_future()). CPU tensors only in this build of torch.
"""

import torch  # noqa: F401  (torch's own module, not this package)
import torch.distributed as dist

try:
    from .. import _torch_backend
except ImportError as e:  # built without torch, or the extension cannot load its libraries
    raise ImportError(f"dtrain.torch: the backend's extension dtrain/_torch_backend*.so cannot be loaded ({e}); "
                      "build dtrain where CMake finds libtorch-dev and pybind11-dev (scripts/install-deps.sh), "
                      "with the Python that imports torch") from e

__all__ = ["BACKEND", "library_version"]

BACKEND = "dtrain"


def _group_name(group_id, ranks):
    """The group's name in dtrain's messages and progress pages."""
    if not ranks:
        return "world"
    shown = ",".join(str(r) for r in ranks[:8]) + (",..." if len(ranks) > 8 else "")
    return f"group {group_id} (ranks {shown})"


def _create(options, pg_options):
    """torch.distributed's creator (extended API): one ProcessGroupDtrain per group this rank is in."""
    if pg_options is not None:
        raise ValueError(f"the dtrain backend takes no pg_options (got {pg_options!r})")
    return _torch_backend.create(options.store, options.group_rank, options.group_size,
                                 options.timeout.total_seconds(),
                                 _group_name(options.group_id, list(options.global_ranks_in_group)))


def library_version():
    """The version of the libdtrain_collectives the backend runs on."""
    return _torch_backend.library_version()


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
