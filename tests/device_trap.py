"""A stand-in accelerator on a machine without one, to catch code that assumes the CPU (issue 49 item 5).

:class:`OnDevice` is a tensor that reports the device :data:`DEVICE` (``meta``: a device type every torch build
knows and none computes on, so no real kernel is ever picked for it) while holding its values in a CPU tensor.  Every
ATen operation on it runs on those values, bit for bit as on the CPU, and gives an :class:`OnDevice` result.  What a
real GPU refuses, it refuses, raising :class:`DeviceMismatch`:

* an operation mixing it with a host tensor of one or more dimensions (a mask built on the host and not moved, a
  tensor made without ``device=`` -- on the default device, the host -- or a hard-coded ``.cpu()`` whose result
  goes back into the model's computation); a host scalar (0-dim) is allowed, as CUDA allows it;
* ``.numpy()`` (a device tensor must come back with ``.cpu()`` first): torch refuses it for a tensor subclass.

:class:`Trap` (a ``TorchFunctionMode``) makes ``torch.<factory>(..., device=DEVICE)`` and ``.to(DEVICE)`` give
:class:`OnDevice` tensors; :func:`trapped_model` moves a loaded model onto it.  It does not catch an operation
that only reads values a real device would give back (``.item()``, ``int()``, ``.tolist()``): those work on CUDA
too.  It is stricter than CUDA in one case: CUDA indexes a device tensor with a host index tensor, this trap
refuses it.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

DEVICE = torch.device("meta")
HOST = torch.device("cpu")


class DeviceMismatch(RuntimeError):
    """A host tensor met a device tensor (module docstring)."""


class OnDevice(torch.Tensor):
    """A tensor on :data:`DEVICE` whose values live in the CPU tensor ``inner`` (module docstring)."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.size(), strides=inner.stride(),
                                                   storage_offset=inner.storage_offset(), dtype=inner.dtype,
                                                   device=DEVICE, requires_grad=False)

    def __init__(self, inner):
        self.inner = inner

    def __repr__(self):
        return f"OnDevice({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default and kwargs.get("device") == HOST:
            return func(args[0].inner, **kwargs)  # .cpu(), .to("cpu"): a host copy
        host = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)
                and not isinstance(a, OnDevice) and a.dim() > 0]
        if host:
            raise DeviceMismatch(f"{func}: a host tensor of shape {tuple(host[0].shape)} meets a tensor on the "
                                 f"device")
        args, kwargs = tree_map(lambda a: a.inner if isinstance(a, OnDevice) else a, (args, kwargs))
        if "device" in kwargs:
            kwargs = {**kwargs, "device": HOST}
        out = func(*args, **kwargs)
        return tree_map(lambda a: OnDevice(a) if isinstance(a, torch.Tensor) else a, out)


def _on_device(where) -> bool:
    return isinstance(where, (str, torch.device)) and torch.device(where).type == DEVICE.type


class Trap(TorchFunctionMode):
    """While active: a factory call with ``device=DEVICE`` and ``.to(DEVICE)`` give :class:`OnDevice` tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            rest = list(args[1:])
            where = kwargs.get("device", rest[0] if rest else None)
            if _on_device(where):
                rest = [HOST if _on_device(x) else x for x in rest]
                kwargs = {k: HOST if k == "device" else v for k, v in kwargs.items()}
                if isinstance(args[0], OnDevice):  # already there: only a dtype change, say
                    return OnDevice(func(args[0].inner, *rest, **kwargs))
                return OnDevice(func(args[0], *rest, **kwargs).clone())
        elif _on_device(kwargs.get("device")):
            return OnDevice(func(*args, **{**kwargs, "device": HOST}))
        elif func is torch.where and len(args) == 3 and isinstance(args[1], OnDevice) and \
                isinstance(args[2], (int, float)):
            # torch's C++ would make the scalar a 0-dim tensor on the meta device, without its value (transformers'
            # eager mask: torch.where(mask, tensor(0.0), min_dtype)); made here, with it
            return func(args[0], args[1], OnDevice(torch.tensor(args[2], dtype=args[1].dtype)), **kwargs)
        return func(*args, **kwargs)


@contextlib.contextmanager
def trapped_model(lm):
    """``lm`` (a loaded :class:`realtrace.model.LoadedModel` on the CPU, given up to this context: its parameters
    are moved) as a model on :data:`DEVICE`, with :class:`Trap` active; its ``source`` says ``device="meta"``."""
    previous = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)  # parameters become OnDevice, not .data-swapped
    autocast_enabled = torch.is_autocast_enabled
    # autocast knows no meta device; transformers asks whether it is on before turning it off (rotary embeddings):
    # it is not (nothing autocasts in a float32 run)
    torch.is_autocast_enabled = lambda *a: False if a and _on_device(a[0]) else autocast_enabled(*a)
    try:
        with Trap():
            lm.model.requires_grad_(False).to(DEVICE)
            yield dataclasses.replace(lm, source=dataclasses.replace(lm.source, device=DEVICE.type))
    finally:
        torch.is_autocast_enabled = autocast_enabled
        torch.__future__.set_swap_module_params_on_conversion(previous)
