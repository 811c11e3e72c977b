"""ctypes mirrors of the C API's structs and function signatures (attnjit_c.h)."""
from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_double, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p

MAX_RANK = 8


class CTensor(ctypes.Structure):
    """attnjit_tensor: shape and strides in elements, outermost first."""
    _fields_ = [("data", c_void_p), ("dtype", c_int32), ("rank", c_int32),
                ("shape", ctypes.c_int64 * MAX_RANK), ("strides", ctypes.c_int64 * MAX_RANK)]


class CCompileOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("arch", c_char_p), ("block_m", c_int32),
                ("block_n", c_int32), ("warps", c_int32), ("stages", c_int32), ("fast_backward", c_int32),
                ("grad_names", POINTER(c_char_p)), ("num_grads", c_int32), ("mainloop", c_int32),
                ("autotune", c_int32)]


class CLaunchArgs(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("q", CTensor), ("k", CTensor), ("v", CTensor),
                ("o", CTensor), ("lse", POINTER(CTensor)),
                ("num_tensors", c_int32), ("tensor_names", POINTER(c_char_p)), ("tensors", POINTER(CTensor)),
                ("num_scalars", c_int32), ("scalar_names", POINTER(c_char_p)), ("scalars", POINTER(c_double))]


class CGradArgs(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("d_o", CTensor), ("dq", CTensor), ("dk", CTensor), ("dv", CTensor),
                ("input_grad_names", POINTER(c_char_p)), ("input_grads", POINTER(CTensor)),
                ("num_input_grads", c_int32)]


_SIGNATURES = {
    "attnjit_api_version": (c_int32, []),
    "attnjit_version_string": (c_char_p, []),
    "attnjit_status_name": (c_char_p, [c_int32]),
    "attnjit_last_error": (c_char_p, []),
    "attnjit_spec_from_json": (c_int32, [c_char_p, c_size_t, POINTER(c_void_p)]),
    "attnjit_spec_to_json": (c_int32, [c_void_p, POINTER(c_void_p)]),
    "attnjit_free_string": (None, [c_void_p]),
    "attnjit_spec_hash": (c_int32, [c_void_p, POINTER(c_uint64)]),
    "attnjit_spec_destroy": (None, [c_void_p]),
    "attnjit_compile": (c_int32, [c_void_p, POINTER(CCompileOptions), POINTER(c_void_p)]),
    "attnjit_kernel_destroy": (None, [c_void_p]),
    "attnjit_kernel_can_launch": (c_int32, [c_void_p]),
    "attnjit_kernel_source": (c_char_p, [c_void_p]),
    "attnjit_kernel_arch": (c_char_p, [c_void_p]),
    "attnjit_kernel_compile_seconds": (c_double, [c_void_p]),
    "attnjit_kernel_spec": (c_void_p, [c_void_p]),
    "attnjit_spec_returns_lse": (c_int32, [c_void_p]),
    "attnjit_spec_num_tensors": (c_int32, [c_void_p]),
    "attnjit_spec_tensor": (c_int32, [c_void_p, c_int32, POINTER(c_char_p), POINTER(c_int32), POINTER(c_int32)]),
    "attnjit_spec_num_scalars": (c_int32, [c_void_p]),
    "attnjit_spec_scalar": (c_int32, [c_void_p, c_int32, POINTER(c_char_p), POINTER(c_int32)]),
    # args and stream as plain addresses: the hot path passes ints, no conversions
    "attnjit_launch": (c_int32, [c_void_p, c_void_p, c_void_p]),
    "attnjit_compile_backward": (c_int32, [c_void_p, POINTER(CCompileOptions), POINTER(c_void_p)]),
    "attnjit_backward_destroy": (None, [c_void_p]),
    "attnjit_backward_can_launch": (c_int32, [c_void_p]),
    "attnjit_launch_backward": (c_int32, [c_void_p, c_void_p, c_void_p, c_void_p]),
    "attnjit_load_bundle": (c_int32, [c_char_p, POINTER(c_int64)]),
    "attnjit_num_bundles": (c_int32, []),
}


def declare(lib) -> None:
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
