"""For a PyTorch 2.x built without libuv (Debian 13's python3-torch): makes
use_libuv=False the default of every TCPStore, and USE_LIBUV=0 the default
of the variable through which env:// rendezvous and torchrun choose it, as
True and 1 are on builds that have libuv (pip's). Only defaults change: a
TCPStore's client speaks the same protocol either way, and libuv only picks
the implementation of a store's server. Put this directory on PYTHONPATH.

Python imports `sitecustomize` at start-up, before torch. This installs an
import hook that, when torch.distributed is first imported (torch._C is
loaded by then), wraps torch._C._c10d_init, which torch.distributed calls
first to make torch._C._distributed_c10d: once it has, a subclass of
TCPStore with that default takes TCPStore's place there, before
torch.distributed and its submodules import it."""
import os
import sys

os.environ.setdefault("USE_LIBUV", "0")


def _with_default(c10d):
    base = c10d.TCPStore

    class TCPStore(base):
        __doc__ = base.__doc__

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    TCPStore.__module__ = base.__module__
    c10d.TCPStore = TCPStore


class _UseLibuvOffByDefault:
    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed":
            return None
        sys.meta_path.remove(self)
        torch_c = sys.modules["torch._C"]
        init = getattr(torch_c, "_c10d_init", None)
        if init is not None:

            def c10d_init():
                done = init()
                if done:
                    _with_default(sys.modules["torch._C._distributed_c10d"])
                return done

            torch_c._c10d_init = c10d_init
        return None  # the usual import goes on


sys.meta_path.insert(0, _UseLibuvOffByDefault())
