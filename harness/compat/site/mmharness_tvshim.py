"""Make PyPI's torchvision importable beside a CPU-only torch.

PyPI's torchvision wheel is a CUDA build: its `_C` extension needs
libtorch_cuda, so beside a CPU torch it fails to load and torchvision's
Python side then dies registering fakes for ops that do not exist
(`operator torchvision::nms does not exist`). Defining the operator schemas,
exactly as torchvision's C++ does, lets the real Python code import; only the
detection kernels stay missing, and nothing the harness runs calls them.

The shim is lazy (it fires on the first `import torchvision`, so interpreter
start stays cheap) and only acts where the real extension cannot load: a GPU
venv's working torchvision is left alone. This file must import nothing heavy
at module level, because it runs in every interpreter start.
"""
from __future__ import annotations

import importlib.machinery
import sys

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, "
    "SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, "
    "float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
    "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, "
    "Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
    "SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, "
    "bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)

# Kept alive for the life of the process: dropping a Library deregisters it.
_LIBRARY = None


def _extension_loads(package_dirs) -> bool:
    """True when torchvision's own `_C` extension loads (a matching build)."""
    import torch

    for d in package_dirs:
        spec = importlib.machinery.PathFinder.find_spec("_C", [d])
        if spec is None or not spec.origin:
            continue
        try:
            torch.ops.load_library(spec.origin)
            return True
        except OSError:
            return False
    return False


def define_schemas() -> bool:
    """Define the torchvision:: schemas unless they exist. True if defined now."""
    global _LIBRARY
    import torch

    if torch._C._dispatch_has_kernel("torchvision::nms") or _LIBRARY is not None:
        return False
    try:
        torch._C._dispatch_find_schema_or_throw("torchvision::nms", "")
        return False  # schemas registered by someone else (the real extension)
    except RuntimeError:
        pass
    lib = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        lib.define(schema)
    _LIBRARY = lib
    return True


class _TorchvisionImportHook:
    """Meta-path finder that runs once, just before torchvision's first import."""

    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.submodule_search_locations:
            if not _extension_loads(spec.submodule_search_locations):
                define_schemas()
        return spec


def install() -> None:
    """Idempotent: arm the hook once per interpreter."""
    if "torchvision" in sys.modules:
        return
    if any(isinstance(f, _TorchvisionImportHook) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _TorchvisionImportHook())
