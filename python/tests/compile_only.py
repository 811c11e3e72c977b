"""For the fake-torch checks (launch_packing_check.py, reciprocal_band_check.py): compiled
callables' kernels are compiled for sm_90a (there is no GPU), so a call gets through every
argument check and stops at "cannot launch". install() returns the list of the spec texts
compiled, in order."""


def install():
    from attnjit import capi, compiled
    compiled_for = []
    kernels: dict = {}

    def kernel_for_sm90a(json_text, device, tile, mainloop=None, autotune=None):
        key = (json_text, device, mainloop, autotune)
        kernel = kernels.get(key)
        if kernel is None:
            kernel = kernels[key] = capi.Kernel(capi.Spec.from_json(json_text), "sm_90a", tile, mainloop=mainloop,
                                                autotune=autotune)
            compiled_for.append(json_text)
        return kernel

    compiled.kernel_for = kernel_for_sm90a
    return compiled_for
