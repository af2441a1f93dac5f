"""dtrain.torch: torch.distributed's backend "dtrain" on dtrain's collectives (see dtrain-torch(7)).

    import torch.distributed as dist
    import dtrain.torch                        # registers the backend "dtrain"

    dist.init_process_group("dtrain")          # env:// (dtrain launch, torchrun), or file://, tcp://
    dist.all_reduce(t)                         # shared memory within a host, TCP across hosts

Every process group (the world, each new_group) is its own dtrain communicator, bootstrapped through
the store torch hands that group; its ops run in issue order on the group's own thread and return
torch Work objects (wait(), is_completed(), get_future()). On torch 2.x the backend is a
torch.distributed Backend registered for "cpu" and "cuda" (CUDA tensors go to dtrain's NCCL path on
the group's stream, where the backend was built against a torch with CUDA); on torch 1.13 a
ProcessGroup for CPU tensors.
"""

import atexit

import torch
import torch.distributed as dist

try:
    from .. import _torch_backend
except ImportError as e:  # built without torch, or the extension cannot load its libraries
    raise ImportError(f"dtrain.torch: the backend's extension dtrain/_torch_backend*.so cannot be loaded ({e}); "
                      "build dtrain where CMake finds libtorch-dev and pybind11-dev (scripts/install-deps.sh), "
                      "with the Python that imports torch") from e

__all__ = ["BACKEND", "ProcessGroupDtrain", "library_version"]

BACKEND = "dtrain"
ProcessGroupDtrain = _torch_backend.ProcessGroupDtrain


def _major_minor(version):
    return tuple(int(p) for p in version.split("+")[0].split(".")[:2])


if _major_minor(_torch_backend.TORCH_VERSION) != _major_minor(torch.__version__):
    raise ImportError(f"dtrain.torch: the backend's extension was built against torch {_torch_backend.TORCH_VERSION}, "
                      f"but this Python runs torch {torch.__version__}; rebuild dtrain with this Python "
                      "(cmake -DPython3_EXECUTABLE=...)")


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
    ranks = [int(r) for r in options.global_ranks_in_group]
    return _torch_backend.create(options.store, options.group_rank, options.group_size,
                                 options.timeout.total_seconds(), _group_name(options.group_id, ranks),
                                 str(options.group_id), ranks)


def library_version():
    """The version of the libdtrain_collectives the backend runs on."""
    return _torch_backend.library_version()


if BACKEND.upper() not in dist.Backend._plugins:
    if _torch_backend.TORCH_BACKEND_CLASS:  # torch 2.x: one Backend object serves both devices of a group
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
    # Before the interpreter finalizes (after it joined its own threads): every group's thread runs
    # the ops already issued and ends, so none of them needs the GIL once it is gone.
    atexit.register(_torch_backend.shutdown_all)
