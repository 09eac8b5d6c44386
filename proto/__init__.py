"""Generated gRPC/protobuf stubs for proto/sparkinfer/v1/serving.proto, built on first import.

`make proto` writes them to proto/gen/ (git-ignored); importing this package runs the same
generator when they are missing, so every process and test sees the same messages.
Use: `from proto import pb, pb_grpc`.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_GEN = os.path.join(_HERE, "gen")
_SRC = os.path.join(_HERE, "sparkinfer", "v1", "serving.proto")


def generate() -> None:
    """Runs grpc_tools.protoc on serving.proto into proto/gen/. Raises RuntimeError on failure."""
    from grpc_tools import protoc

    os.makedirs(_GEN, exist_ok=True)
    args = ["protoc", f"-I{_HERE}", f"--python_out={_GEN}", f"--pyi_out={_GEN}",
            f"--grpc_python_out={_GEN}", _SRC]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {_SRC}")


def _stale() -> bool:
    out = os.path.join(_GEN, "sparkinfer", "v1", "serving_pb2.py")
    return not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(_SRC)


if _stale():
    generate()
if _GEN not in sys.path:
    sys.path.insert(0, _GEN)

from sparkinfer.v1 import serving_pb2 as pb  # noqa: E402
from sparkinfer.v1 import serving_pb2_grpc as pb_grpc  # noqa: E402

# Initial-metadata key of a Generate call the scheduler admitted (value "1"), sent before any token: a refusal
# (RESOURCE_EXHAUSTED, INVALID_ARGUMENT, ...) ends the call without it. See Serving.Generate in serving.proto.
ADMITTED_METADATA_KEY = "sparkinfer-admitted"
# Trailing-metadata key of a Generate call refused because it does not fit the context (INVALID_ARGUMENT): the
# value is "<context>,<prompt tokens>,<max_tokens>" (max_tokens 0 when the prompt alone leaves no room), so that a
# gateway words the error its API's way.
CONTEXT_METADATA_KEY = "sparkinfer-context-exceeded"

__all__ = ["pb", "pb_grpc", "generate", "ADMITTED_METADATA_KEY", "CONTEXT_METADATA_KEY"]
