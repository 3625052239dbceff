"""Why does the embedded model start through this module rather than ``python -m llama_cpp.server``?

llama.cpp may move weights into "extra buffer types" (repacked layouts for the CPU's matrix units).
On CPUs with AMX, llama-cpp-python 0.3.36 built for the host crashes (SIGSEGV) in the first batched
decode of this model — any prompt longer than one token — while single-token decoding works.
Turning the extra buffers off (``use_extra_bufts = False``, a llama.cpp model parameter the
Python server does not expose) avoids that code path at a modest speed cost. This launcher sets it
and then runs the stock server unchanged, with the same command-line flags.

``SOOTHE_LLAMA_EXTRA_BUFTS=1`` keeps llama.cpp's default, for machines where it works.
"""

from __future__ import annotations

import os
import runpy
from typing import Any

EXTRA_BUFTS_ENV = "SOOTHE_LLAMA_EXTRA_BUFTS"


def disable_extra_buffer_types() -> None:
    """Make every model llama-cpp-python loads in this process skip the extra buffer types."""
    import llama_cpp.llama_cpp as bindings

    stock = bindings.llama_model_default_params

    def params() -> Any:
        value = stock()
        value.use_extra_bufts = False
        return value

    bindings.llama_model_default_params = params


def main() -> None:
    if os.environ.get(EXTRA_BUFTS_ENV) != "1":
        disable_extra_buffer_types()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
