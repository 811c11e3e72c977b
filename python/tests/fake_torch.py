"""A stand-in for the parts of torch that attnjit's call path touches (shapes, strides,
dtypes, data pointers, new_empty, the stream), for checking on a machine without torch or
a GPU that the launch arguments attnjit packs pass every argument check of the C API.
No memory is allocated: data pointers are distinct, 256-byte aligned fake addresses."""
import contextlib
import itertools
import sys
import types


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return f"torch.{self.name}"


float16, bfloat16, float32, float64 = dtype("float16", 2), dtype("bfloat16", 2), dtype("float32", 4), dtype("float64", 8)
int32, int64, bool_ = dtype("int32", 4), dtype("int64", 8), dtype("bool", 1)

_next_address = itertools.count(1 << 32, 1 << 24)  # 16 MiB apart: no overlaps


class Size(tuple):
    pass


def _contiguous(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= d
    return tuple(reversed(strides))


class Tensor:
    def __init__(self, shape, dt, strides=None, device=0, address=None):
        self.shape = Size(shape)
        self.dtype = dt
        self._strides = tuple(strides) if strides is not None else _contiguous(shape)
        self._device = device
        self._address = next(_next_address) if address is None else address
        self.requires_grad = False

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def dim(self):
        return len(self.shape)

    def data_ptr(self):
        return self._address

    def get_device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device >= 0

    @property
    def device(self):
        return f"cuda:{self._device}" if self._device >= 0 else "cpu"

    def new_empty(self, shape, dtype=None):
        return Tensor(shape, dtype or self.dtype, device=self._device)

    def expand(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):  # expand((B, H, N, D)) as torch takes it
            shape = tuple(shape[0])
        if len(shape) != len(self.shape) or any(old not in (1, new) for old, new in zip(self.shape, shape)):
            raise RuntimeError(f"expand {tuple(self.shape)} to {shape}")
        strides = tuple(0 if old == 1 and new != 1 else s for old, new, s in zip(self.shape, shape, self._strides))
        return Tensor(shape, self.dtype, strides, self._device, self._address)

    def transpose(self, a, b):
        shape, strides = list(self.shape), list(self._strides)
        shape[a], shape[b] = shape[b], shape[a]
        strides[a], strides[b] = strides[b], strides[a]
        return Tensor(shape, self.dtype, strides, self._device, self._address)


    def view(self, *shape):
        """torch's view: the strides of the new shape (ATen's computeStride), or RuntimeError
        when no strides express it."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        old_shape, old_strides = tuple(self.shape), self._strides
        numel = 1
        for d in old_shape:
            numel *= d
        if numel == 0 or not old_shape:
            return Tensor(shape, self.dtype, _contiguous(shape), self._device, self._address)
        strides = [0] * len(shape)
        view_d = len(shape) - 1
        chunk_base = old_strides[-1]
        tensor_numel = view_numel = 1
        for tensor_d in range(len(old_shape) - 1, -1, -1):
            tensor_numel *= old_shape[tensor_d]
            if tensor_d == 0 or (old_shape[tensor_d - 1] != 1
                                 and old_strides[tensor_d - 1] != tensor_numel * chunk_base):
                while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                    strides[view_d] = view_numel * chunk_base
                    view_numel *= shape[view_d]
                    view_d -= 1
                if view_numel != tensor_numel:
                    raise RuntimeError(f"view {shape} of a tensor {old_shape} with strides {old_strides}")
                if tensor_d > 0:
                    chunk_base = old_strides[tensor_d - 1]
                    tensor_numel = view_numel = 1
        if view_d != -1:
            raise RuntimeError(f"view {shape} of a tensor {old_shape}")
        return Tensor(shape, self.dtype, strides, self._device, self._address)

    def __getitem__(self, index):
        if not isinstance(index, int) or not 0 <= index < self.shape[0]:
            raise NotImplementedError(f"fake_torch: only t[i] with 0 <= i < {self.shape[0]}, got {index!r}")
        return Tensor(self.shape[1:], self.dtype, self._strides[1:], self._device,
                      self._address + index * self._strides[0] * self.dtype.itemsize)

    def contiguous(self):
        if self._strides == _contiguous(self.shape):
            return self
        return Tensor(self.shape, self.dtype, device=self._device)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def reshape(self, *shape):
        try:
            return self.view(*shape)
        except RuntimeError:
            return self.contiguous().view(*shape)

    def float(self):
        return self if self.dtype is float32 else Tensor(self.shape, float32, device=self._device)

    def new_full(self, shape, fill_value, dtype=None):
        return Tensor(shape, dtype or self.dtype, device=self._device)


def empty(*shape, dtype=float32, device=0):
    """torch.empty(2, 3) or torch.empty((2, 3)) (a shape tuple, as attnjit allocates
    gradients); device an index or a fake tensor's device text ("cuda:0", "cpu")."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if isinstance(device, str):
        device = -1 if device == "cpu" else int(device.split(":")[1])
    return Tensor(shape, dtype, device=device)


def install():
    """Makes `import torch` return this module."""
    module = sys.modules[__name__]
    module.bool = bool_
    cuda = types.SimpleNamespace(device=lambda index: contextlib.nullcontext(), device_count=lambda: 1,
                                 current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=0))
    module.cuda = cuda
    module._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    module.is_grad_enabled = lambda: True
    # a CUDA 12 build: a first training call compiles its forward and backward at once
    module.version = types.SimpleNamespace(cuda="12.8")
    sys.modules["torch"] = module
