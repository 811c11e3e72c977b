"""attnjit.compile(...): a reusable attention callable.

Tracing happens once, in compile(). A call checks q, k, v cheaply, re-reads the captured
tensors and float scalars from the traced function's closure / globals, finds the
Launcher for (dtype, Dqk, Dv, device) and launches on torch's current stream. A kernel is
compiled (attnjit's memory / disk caches, else NVRTC) the first time a key is seen. Heads
are not part of the key: the kernel reads them from the tensors."""
from __future__ import annotations

import sys
from threading import get_ident

from . import autograd, capi, dtypes, spec_json, torch_ops
from .errors import ArgumentError, InternalError, RuntimeEnvironmentError
from ._at_once import at_once
from ._load_once import LoadOnce
from .launcher import Launcher
from .reciprocal_band import check_reciprocal_band
from .trace import trace

_MAX_VARIANTS = 8          # traces kept per callable (int constants / functions that changed)
_kernels = LoadOnce()      # (spec json, device, tile) -> capi.Kernel, shared by all callables
_NO_EXTRAS = (None, None, None, None)  # sinks, gate, score_conv, reciprocal_band: none given


def _not_compiling() -> bool:  # torch without torch.library.custom_op (< 2.4)
    return False


def _first_is_compiling() -> bool:
    """Stands for torch.compiler.is_compiling until torch_ops.install() puts that in its place
    (at import when torch was imported first, else at the first compile() or call). It is
    marked as a constant-result function (torch_ops), so that dynamo, meeting it first, runs
    it for real: it installs the torch ops then, and says whether dynamo is tracing."""
    if "torch" not in sys.modules:
        return False
    torch_ops.install()
    guards = sys.modules.get("torch._guards")
    return guards is not None and guards.TracingContext.try_get() is not None


_first_is_compiling._dynamo_marked_constant = True  # what torch.compiler.assume_constant_result sets

# torch.compiler.is_compiling once torch_ops.install() registered the torch ops (torch >= 2.4):
# under torch.compile a call then goes through them (torch_ops), never through ctypes here.
_is_compiling = _first_is_compiling


def _torch():
    try:
        import torch
    except ImportError:
        raise RuntimeEnvironmentError("calling attnjit attention needs PyTorch (import torch failed); "
                                      "without torch, attnjit.spec_json() still builds the spec text") from None
    if torch_ops._installed is None:
        torch_ops.install()
    return torch


def kernel_for(json_text: str, device: int, tile: dict | None, mainloop: str | None = None,
               autotune: bool | None = None):
    """The compiled kernel of a spec on a CUDA device (compiled at most once per process)."""
    torch = _torch()

    def make():
        with torch.cuda.device(device):  # load into this device's primary context
            return capi.Kernel(capi.Spec.from_json(json_text), None, tile, mainloop=mainloop, autotune=autotune)
    return _kernels.get((json_text, device, tuple(sorted((tile or {}).items())), mainloop, autotune), make,
                        f"the kernel of {json_text} for CUDA device {device}")


def _a_new_thread_loads_into(device: int) -> bool:
    """Whether the backward compiled on a thread of its own (at_once) is loaded into `device`'s
    primary context: that thread has made no CUDA call; torch.cuda.device(device) (backward_for)
    makes the context current there from CUDA 12 on (cudaSetDevice initialises it), and where
    no context is current attnjit's driver calls take device 0's primary one."""
    version = _torch().version.cuda
    return device == 0 or (version is not None and int(version.split(".")[0]) >= 12)


class _Variant:
    """One trace and the launchers built for it."""

    def __init__(self, traced):
        self.traced = traced
        self.launchers: dict = {}
        self.backwards: dict = {}  # (dtype, Dqk, Dv, device) -> capi.Backward
        # what a call reads, precomputed: (read, torch dtype, ndim, dtype code, input)
        self.tensor_reads = [(t.slot.read, t.torch_dtype, 0 if t.zero_dim else t.rank, dtypes.CODES[t.dtype], t)
                             for t in traced.tensors]
        self.scalar_reads = [s.slot.read for s in traced.scalars]
        # structural tensors (sinks, gate, score_conv, the reciprocal band's alpha): their names
        # in the spec, which sorts them among the captured tensors
        self.extra_names = tuple(spec_json.structural_name(traced, kind) for kind in spec_json.STRUCTURAL)
        self.sinks_name = self.extra_names[0]
        self.tensor_names = [t.name for t in traced.tensors]

    def merge(self, tensors: list, values: list, extras) -> tuple:
        """The launch's tensors and their values in the spec's (name) order: the captured
        ones, and the structural tensors given (extras: sinks, gate, score_conv, the reciprocal
        band's alpha [Hq], or None)."""
        if all(x is None for x in extras):
            return tensors, values
        rows = list(zip(self.tensor_names, tensors, values))
        for name, x in zip(self.extra_names, extras):
            if x is not None:
                rows.append((name, (x.data_ptr(), dtypes.CODES[dtypes.name_of(x.dtype)], x.shape, x.stride()), x))
        rows.sort(key=lambda r: r[0])
        return [r[1] for r in rows], [r[2] for r in rows]

    def expected(self, sig) -> list:
        """(name, dtype, rank) of the spec's tensors for the structural signature sig."""
        rows = [(t.name, t.dtype, t.rank) for t in self.traced.tensors]
        sd, gate_dtype, conv, band = sig
        if sd is not None:
            rows.append((self.extra_names[0], sd, 1))
        if gate_dtype is not None:
            rows.append((self.extra_names[1], gate_dtype, 4))
        if conv is not None:
            rows.append((self.extra_names[2], conv[2], 3))
        if band is not None:
            rows.append((self.extra_names[3], "f32", 1))
        return sorted(rows)


class CompiledAttention:
    """fn(q, k, v) -> out, or (out, lse) with return_lse. See attnjit.compile."""

    def __init__(self, score_mod=None, mask=None, causal=False, scale=None, enable_gqa=False,
                 return_lse=False, tile=None, deterministic=True, mainloop=None, autotune=None):
        if scale is not None and not isinstance(scale, (int, float)):
            raise TypeError(f"scale must be a number or None, got {type(scale).__name__}")
        self.score_mod, self.mask, self.causal = score_mod, mask, bool(causal)
        self.scale, self.enable_gqa, self.return_lse = scale, bool(enable_gqa), bool(return_lse)
        self.tile = dict(tile) if tile else None
        self.deterministic = bool(deterministic)  # of the backward
        if mainloop not in capi.MAINLOOPS:
            raise ValueError(f"mainloop {mainloop!r}: use None (attnjit's choice), 'sm80' or 'sm90'")
        self.mainloop = mainloop  # of the forward and of the backward's key-tile kernel
        if autotune not in capi.AUTOTUNE:
            raise ValueError(f"autotune {autotune!r}: use None (as ATTNJIT_AUTOTUNE says), True or False")
        self.autotune = autotune  # of the forward and of the backward's key-tile kernel (docs/autotune.md)
        self._variants: list[_Variant] = []
        self._variant = self._add_variant()
        self._uid = torch_ops.remember(self)  # how compiled graphs name this callable
        if torch_ops._installed is None and "torch" in sys.modules:
            torch_ops.install()  # before any torch.compile traces a call of this callable

    # ---- inspection ---------------------------------------------------------------------
    @property
    def traced(self):
        """The current trace: .score_mod and .mask texts, .tensors, .scalars."""
        return self._variant.traced

    def spec_json(self, dtype="bf16", head_dim: int = 128, head_dim_v: int | None = None,
                  sinks_dtype: str | None = None, gate: bool = False, score_conv: tuple | None = None,
                  reciprocal_band: tuple | None = None) -> str:
        """The JSON spec this callable compiles for one dtype and head dims (and, with
        sinks_dtype, gate, score_conv (c_q, c_k, dtype) or reciprocal_band (W, causal), for
        calls that pass sinks= of that dtype, gate=, score_conv= or reciprocal_band=; a call's
        band is causal when the callable is)."""
        return spec_json.build(self.traced, dtype=dtype, head_dim_qk=head_dim,
                               head_dim_v=head_dim if head_dim_v is None else head_dim_v,
                               scale=self.scale, return_lse=self.return_lse, sinks_dtype=sinks_dtype, gate=gate,
                               score_conv=score_conv, reciprocal_band=reciprocal_band)

    def __repr__(self):
        t = self.traced
        return (f"attnjit.compile(score_mod={t.score_mod!r}, mask={t.mask!r}, scale={self.scale}, "
                f"enable_gqa={self.enable_gqa}, return_lse={self.return_lse})")

    # ---- tracing ------------------------------------------------------------------------
    def _add_variant(self) -> _Variant:
        variant = _Variant(trace(self.score_mod, self.mask, self.causal))
        self._variants.insert(0, variant)
        del self._variants[_MAX_VARIANTS:]
        return variant

    def _current_variant(self) -> _Variant:
        """The trace whose guards hold for the current closure / globals (retraces if none)."""
        for variant in self._variants:
            if variant.traced.guards_hold() and self._tensors_match(variant):
                self._variant = variant
                return variant
        self._variant = self._add_variant()
        return self._variant

    @staticmethod
    def _tensors_match(variant) -> bool:
        for t in variant.traced.tensors:
            try:
                value = t.slot.read()
            except Exception:
                return False
            if getattr(value, "dtype", None) is not t.torch_dtype or value.dim() != (0 if t.zero_dim else t.rank):
                return False
        return True

    # ---- the call -----------------------------------------------------------------------
    def __call__(self, q, k, v, sinks=None, gate=None, score_conv=None, reciprocal_band=None):
        extras = (sinks, gate, score_conv, reciprocal_band)
        if _is_compiling():  # torch.compile (dynamo) is tracing this call: the torch ops
            return torch_ops.call_compiled(self, q, k, v, extras)
        return self._call(q, k, v, extras)

    def _call(self, q, k, v, extras=_NO_EXTRAS, op=None):
        """The call; op = (variant, captured tensors, scalars, need_lse) when the torch op
        attnjit::attention runs it (below autograd, with the values the graph passed)."""
        if op is None:
            variant = self._variant
            traced = variant.traced
            if traced.guards and not traced.guards_hold():
                variant = self._current_variant()
                traced = variant.traced
        else:
            variant = op[0]
        qs, ks, vs = q.shape, k.shape, v.shape
        if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
            self._bad_arguments(q, k, v)
        dtype = q.dtype
        device = q.get_device()
        B, Hq, Nq, Dqk = qs
        Hkv, Nk = ks[1], ks[2]
        qst, kst, vst = q.stride(), k.stride(), v.stride()
        if not (k.dtype is dtype and v.dtype is dtype and k.get_device() == device and v.get_device() == device
                and ks[0] == B and vs[0] == B and ks[3] == Dqk and vs[1] == Hkv and vs[2] == Nk
                and (Hq == Hkv or (self.enable_gqa and Hkv > 0 and Hq % Hkv == 0))
                and qst[3] == 1 and kst[3] == 1 and vst[3] == 1 and Nk > 0):
            self._bad_arguments(q, k, v)
        given_extras = extras  # as passed: a retrace calls again with them
        extras, sig = self._check_extras(extras, q, k, vs[3], device)
        training = q.requires_grad or k.requires_grad or v.requires_grad or any(
            x is not None and x.requires_grad for x in extras)

        tensors = []
        values = []  # the tensors themselves: a training call keeps them alive
        grad_by_name = {}  # captured tensors that require grad (their gradients come from the backward)
        given = None if op is None else iter(op[1])
        for read, torch_dtype, ndim, code, t in variant.tensor_reads:
            value = read() if given is None else next(given)
            values.append(value)
            if getattr(value, "dtype", None) is not torch_dtype or value.dim() != ndim:
                if op is not None:
                    raise InternalError(f"attnjit::attention got captured tensor '{t.name}' as {value.dtype} rank "
                                        f"{value.dim()}, but its plan was traced for {torch_dtype} rank {ndim}")
                return self._retrace_call(q, k, v, given_extras)
            if value.get_device() != device:
                raise ArgumentError(f"captured tensor '{t.name}' ({t.slot.where}) is on "
                                    f"{value.device} but q is on {q.device}; move it to the same device")
            if value.requires_grad:
                grad_by_name[t.name] = value
            if ndim:
                tensors.append((value.data_ptr(), code, value.shape, value.stride()))
            else:  # a 0-dim tensor is read as a rank-1 tensor of one element
                tensors.append((value.data_ptr(), code, (1,), (1,)))
        scalars = [float(read()) for read in variant.scalar_reads] if op is None else [float(x) for x in op[2]]
        tensors, values = variant.merge(tensors, values, extras)  # in the spec's order
        if op is not None:
            return self._op_launch(variant, q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, scalars, sig, op[3])
        if (training or grad_by_name) and _torch().is_grad_enabled() and B and Nq and Hq:
            return self._call_training(variant, q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, values, scalars,
                                       grad_by_name, extras, sig)

        launcher = variant.launchers.get((dtype, Dqk, vs[3], device, get_ident(), sig))
        if launcher is None:
            launcher = self._make_launcher(variant, q, vs[3], device, sig=sig)
        if B == 0 or Nq == 0 or Hq == 0:
            out = q.new_empty((B, Hq, Nq, vs[3]))
            return (out, q.new_empty((B, Hq, Nq), dtype=_torch().float32)) if self.return_lse else out
        return launcher(q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, scalars)

    # ---- the torch ops' implementations (torch_ops) -------------------------------------------
    def _op_forward(self, variant, q, k, v, captured, scalars, extras, need_lse: bool):
        """attnjit::attention: (out, lse); lse is empty ([0]) unless need_lse."""
        return self._call(q, k, v, extras, (variant, captured, scalars, need_lse))

    def _op_launch(self, variant, q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, scalars, sig, need_lse):
        B, Hq, Nq = qs[0], qs[1], qs[2]
        torch = _torch()
        key = (q.dtype, qs[3], vs[3], device, get_ident(), sig) + (("train",) if need_lse else ())
        launcher = variant.launchers.get(key)
        if launcher is None:  # with need_lse, the training launcher: the kernel an eager training call runs
            launcher = self._make_launcher(variant, q, vs[3], device, return_lse=True if need_lse else None, sig=sig)
        if B == 0 or Nq == 0 or Hq == 0:
            out = q.new_empty((B, Hq, Nq, vs[3]))
        else:
            out = launcher(q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, scalars)
        if isinstance(out, tuple):
            return out
        return out, q.new_empty((B, Hq, Nq) if need_lse else (0,), dtype=torch.float32)

    def _op_backward(self, variant, d_out, q, k, v, out, lse, captured, scalars, extras, captured_needs,
                     extras_needs):
        """attnjit::attention_backward: (dq, dk, dv, gradients of the captured tensors asked
        for, in their order, then of the structural tensors (sinks, gate, the reciprocal band's
        alpha) asked for), as the eager backward computes them. extras: (sinks, gate,
        score_conv, (W, alpha) or None)."""
        torch = _torch()
        device = q.get_device()
        dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
        dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
        results, input_grads, grad_by_name = [], [], {}
        for t, value, need in zip(variant.traced.tensors, captured, captured_needs):
            if need:
                g = torch.empty(value.shape, dtype=value.dtype, device=value.device)
                results.append(g)
                input_grads.append((t.name, g.reshape(1) if g.dim() == 0 else g))  # the kernels see [1]
                grad_by_name[t.name] = value
        extras, sig = self._check_extras(extras, q, k, v.shape[3], device)
        for name, x, need in zip(variant.extra_names, extras, extras_needs):
            if x is not None and need:
                # contiguous, of the tensor's shape: a stride-0 alpha [Hq] (one weight for
                # every head) gets a dense [Hq] gradient that autograd sums into its element
                g = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                results.append(g)
                input_grads.append((name, g))
        B, Hq, Nq = q.shape[0], q.shape[1], q.shape[2]
        if B == 0 or Hq == 0 or Nq == 0:  # nothing read: every gradient is zero
            for g in (dq, dk, dv, *results):
                g.zero_()
            return dq, dk, dv, results
        tensors, values = [], []
        for value, (_, _, ndim, code, _) in zip(captured, variant.tensor_reads):
            values.append(value)
            tensors.append((value.data_ptr(), code, value.shape, value.stride()) if ndim else
                           (value.data_ptr(), code, (1,), (1,)))
        tensors, values = variant.merge(tensors, values, extras)
        grads = tuple(sorted(grad_by_name))
        backward = self._backward(variant, q, v.shape[3], device, grads, sig,
                                  extras[3] is not None and bool(extras_needs[3]))
        call = autograd.Call(backward, dtypes.CODES[dtypes.name_of(q.dtype)], device,
                             [(value, *t) for value, t in zip(values, tensors)], scalars, grads,
                             [grad_by_name[n] for n in grads], variant.extra_names)
        d_o = d_out.contiguous()
        if d_o.data_ptr() % 16:  # a contiguous view at an odd offset: the kernels load 16 bytes
            d_o = d_o.clone()
        call.launch(q, k, v, out, lse, d_o, dq, dk, dv, input_grads)
        return dq, dk, dv, results

    def _check_extras(self, extras, q, k, dv: int, device: int) -> tuple:
        """(extras, sig): the structural tensors checked (a gate broadcastable to the output
        is expanded to it; one that requires grad is then materialised, since its gradient
        is per element; the reciprocal band's (W, alpha) becomes alpha as a float32 tensor
        [Hq]), and the signature of the spec they need: (sinks dtype, gate dtype, (c_q, c_k,
        dtype) of score_conv, (W, causal) of the reciprocal band), None where absent."""
        sinks, gate, conv, band = extras
        if sinks is None and gate is None and conv is None and band is None:
            return extras, _NO_EXTRAS
        torch = _torch()
        B, Hq, Nq = q.shape[0], q.shape[1], q.shape[2]
        for name, x in (("sinks", sinks), ("gate", gate), ("score_conv", conv)):
            if x is None:
                continue
            if not isinstance(x, torch.Tensor):
                raise ArgumentError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
            if x.get_device() != device:
                raise ArgumentError(f"{name} is on {x.device} but q is on {q.device}; move it to the same device")
        sd = None
        if sinks is not None:
            sd = dtypes.name_of(sinks.dtype)
            if sd not in spec_json.SINK_DTYPES:
                raise ArgumentError(f"sinks has dtype {sinks.dtype}; sink logits are float32, float16 or bfloat16")
            if sinks.dim() != 1 or sinks.shape[0] != Hq:
                raise ArgumentError(f"sinks has shape {tuple(sinks.shape)}; it must be [Hq] = [{Hq}]: one sink logit "
                                    "per query head")
        gd = None
        if gate is not None:
            shape = (B, Hq, Nq, dv)
            if gate.dtype is not q.dtype:
                raise ArgumentError(f"gate has dtype {gate.dtype}; it must have q's dtype, {q.dtype}")
            if tuple(gate.shape) != shape:
                try:
                    gate = gate.expand(shape)
                except RuntimeError:
                    raise ArgumentError(f"gate has shape {tuple(gate.shape)}; it must be the output's shape "
                                        f"[B, Hq, Nq, Dv] = {list(shape)}, or broadcast to it") from None
            if gate.requires_grad and 0 in gate.stride() and torch.is_grad_enabled():
                # its gradient is per element (the backward refuses a stride-0 gate whose
                # gradient is asked for): materialise it inside the autograd graph, which
                # then sums the gradient back over the broadcast dims (ExpandBackward)
                gate = gate.contiguous()
            gd = dtypes.name_of(gate.dtype)
        cs = None
        if conv is not None:
            cd = dtypes.name_of(conv.dtype)
            if cd not in spec_json.SINK_DTYPES or conv.dim() != 3 or conv.shape[0] != Hq:
                raise ArgumentError(f"score_conv is {conv.dtype} of shape {tuple(conv.shape)}; the convolution's "
                                    f"kernel is a float32, float16 or bfloat16 tensor [Hq, c_q, c_k] with Hq = {Hq}")
            cs = (int(conv.shape[1]), int(conv.shape[2]), cd)
        bs = None
        if band is not None:
            width, band = check_reciprocal_band(band, q, k, torch)
            bs = (width, self.causal)  # the band's causal form is the callable's
        return (sinks, gate, conv, band), (sd, gd, cs, bs)

    def _retrace_call(self, q, k, v, extras=_NO_EXTRAS):
        """A captured tensor changed dtype or rank: trace again (once) and call."""
        variant = self._current_variant()
        for t in variant.traced.tensors:
            value = t.slot.read()
            if not (getattr(value, "dtype", None) is t.torch_dtype and hasattr(value, "data_ptr")):
                raise ArgumentError(f"captured tensor '{t.name}' ({t.slot.where}) holds {value!r}; bind a "
                                    "CUDA torch tensor to it before calling")
        return self(q, k, v, *extras)

    def _call_training(self, variant, q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, values, scalars,
                       grad_by_name, extras, sig):
        """The call with autograd: the forward with LSE, the backward kernels on loss.backward();
        grad_by_name: captured tensors that require grad (they get .grad too, as do sinks, the
        gate and the reciprocal band's alpha)."""
        key = (q.dtype, q.shape[3], vs[3], device, get_ident(), sig, "train")
        launcher = variant.launchers.get(key)
        grads = tuple(sorted(grad_by_name))
        # the reciprocal band's alpha: its gradient is computed only when asked for at compile
        # time (when alpha requires grad, which is also the autograd Function's needs_input_grad)
        alpha_grad = extras[3] is not None and extras[3].requires_grad

        def backward_of_spec():
            return self._backward(variant, q, vs[3], device, grads, sig, alpha_grad)
        if launcher is None and _a_new_thread_loads_into(device):
            # the first training call: the forward and the backward compile at once
            launcher, backward = at_once(
                lambda: self._make_launcher(variant, q, vs[3], device, return_lse=True, sig=sig), backward_of_spec)
        else:
            if launcher is None:
                launcher = self._make_launcher(variant, q, vs[3], device, return_lse=True, sig=sig)
            backward = backward_of_spec()
        # Captured tensors are kept alive with the call: the backward reads them again.
        grad_values = [grad_by_name[n] for n in grads]
        call = autograd.Call(backward, dtypes.CODES[dtypes.name_of(q.dtype)], device,
                             [(value, *t) for value, t in zip(values, tensors)], scalars, grads, grad_values,
                             variant.extra_names)
        out, lse = autograd.attention_function().apply(
            call, lambda: launcher(q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, scalars), q, k, v, *extras,
            *grad_values)
        return (out, lse) if self.return_lse else out

    def _backward(self, variant, q, dv: int, device: int, grads: tuple, sig: tuple, alpha_grad: bool):
        """The compiled backward of a training launch's spec; grads: the captured tensors
        whose gradients it computes (sorted names). alpha_grad: it also computes the reciprocal
        band's d alpha, which the C library computes only when the backward was compiled with
        alpha's name among its gradients (the sinks' and the gate's come whenever their buffer
        is passed at launch): alpha's name is then asked for too."""
        if alpha_grad:
            grads = grads + (variant.extra_names[3],)
        key = (q.dtype, q.shape[3], dv, device, grads, sig)
        backward = variant.backwards.get(key)
        if backward is None:
            # `tile` is the forward kernel's; the backward kernels take their own default tile.
            backward = variant.backwards[key] = autograd.backward_for(
                self._spec_text(variant, q, dv, True, sig), device, None, self.deterministic, grads, self.mainloop,
                self.autotune)
        return backward

    def _spec_text(self, variant, q, dv: int, return_lse: bool, sig: tuple) -> str:
        """The spec JSON of a launch: the forward kernel's, and the backward's (with LSE)."""
        dtype = dtypes.name_of(q.dtype)
        if dtype not in dtypes.ATTENTION_DTYPES:
            raise ArgumentError(f"q has dtype {q.dtype}; attnjit takes float16, bfloat16 or float32")
        return spec_json.build(variant.traced, dtype=dtype, head_dim_qk=q.shape[3], head_dim_v=dv,
                               scale=self.scale, return_lse=return_lse, sinks_dtype=sig[0], gate=sig[1] is not None,
                               score_conv=sig[2], reciprocal_band=sig[3])

    def _make_launcher(self, variant, q, dv: int, device: int, return_lse: bool | None = None,
                       sig: tuple = _NO_EXTRAS) -> Launcher:
        if device < 0:
            raise ArgumentError(f"q, k and v must be CUDA tensors, got {q.device}")
        dtype = dtypes.name_of(q.dtype)
        traced = variant.traced
        with_lse = self.return_lse if return_lse is None else return_lse
        text = self._spec_text(variant, q, dv, with_lse, sig)
        kernel = kernel_for(text, device, self.tile, self.mainloop, self.autotune)
        spec = kernel.spec
        expected = variant.expected(sig)
        ranks = [rank for _, _, rank in expected]
        if spec.tensors() != expected or [n for n, _ in spec.scalars()] != [s.name for s in traced.scalars]:
            raise InternalError(f"the compiled spec reads {spec.tensors()} / {spec.scalars()} but the trace "
                                f"captured {expected} / {[s.name for s in traced.scalars]}")
        launcher = Launcher(kernel, dtype=dtype, head_dim_v=dv, return_lse=with_lse,
                            tensor_ranks=ranks, num_scalars=len(traced.scalars))
        # one launcher per thread: its argument buffer is rewritten by every call
        key = (q.dtype, q.shape[3], dv, device, get_ident(), sig)
        variant.launchers[key + ("train",) if return_lse is not None else key] = launcher
        return launcher

    def _bad_arguments(self, q, k, v):
        """Raises the ArgumentError that says what is wrong with q, k, v."""
        torch = _torch()
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor):
                raise ArgumentError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() != 4:
                raise ArgumentError(f"{name} has shape {tuple(t.shape)}; q, k, v are 4-D: "
                                    "q [B, Hq, Nq, D], k [B, Hkv, Nk, D], v [B, Hkv, Nk, Dv]")
            if not t.is_cuda:
                raise ArgumentError(f"{name} is on {t.device}; attnjit runs on CUDA tensors")
            if t.dtype is not q.dtype:
                raise ArgumentError(f"{name} has dtype {t.dtype} but q has {q.dtype}; q, k, v share one dtype")
            if t.device != q.device:
                raise ArgumentError(f"{name} is on {t.device} but q is on {q.device}")
            if t.stride(3) != 1:
                raise ArgumentError(f"{name} has strides {t.stride()}: the last (head) dimension must be "
                                    "contiguous (stride 1); other dimensions may have any stride")
        (B, Hq, _, D), (Bk, Hkv, Nk, Dk), (Bv, Hv, Nv, _) = q.shape, k.shape, v.shape
        if not B == Bk == Bv:
            raise ArgumentError(f"batch sizes differ: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
        if Dk != D:
            raise ArgumentError(f"q has head dim {D} but k has {Dk}; they must match")
        if (Hv, Nv) != (Hkv, Nk):
            raise ArgumentError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same heads and length")
        if Nk == 0:
            raise ArgumentError("k and v have length 0: attention needs at least one key")
        if Hq != Hkv:
            if not self.enable_gqa:
                raise ArgumentError(f"q has {Hq} heads and k, v have {Hkv}; pass enable_gqa=True for "
                                    "grouped-query attention (as with torch SDPA)")
            if Hkv == 0 or Hq % Hkv:
                raise ArgumentError(f"q has {Hq} heads, not a multiple of k and v's {Hkv} (GQA needs Hq % Hkv == 0)")
        raise InternalError(f"q, k, v were rejected but no check failed: {q.shape} {k.shape} {v.shape}")
