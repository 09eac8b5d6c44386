"""Scheduler <-> worker boundary: the version of what crosses it, which both ends compare when they meet.

The scheduler and the worker each run their own copy of proto/ (deploy/Dockerfile.scheduler and .worker: two images,
two containers of one Pod, two compose services), and a container restarted with an image tagged :latest is pulled
again (Kubernetes' imagePullPolicy for :latest is Always), so a worker of one release can meet a scheduler of another.
Protobuf then parses the other side's frames without a word where a field is new to it or means something else: a
worker from before StepRow.block_table_start read a row's new block ids as its whole block table (attention over the
wrong KV blocks), and a previous_token row's placeholder id (-1) as its token.

WIRE_VERSION is a digest of every message and enum a WorkerMessage carries: their full names and each field's name,
number, label, type and message or enum type, each enum value's name and number (the descriptors, not the .proto's
text: a comment does not change it), and SOCKETS, the ZeroMQ socket types of each end: a worker of another topology
cannot even connect its step socket (ZeroMQ refuses a PULL at a ROUTER) and must be refused by its version, said in
the log, not left waiting in silence. Any change to what crosses the boundary gives another version. The worker sends
it in each WorkerHello and the scheduler in each Ping; either end refuses the other's of another version (the
scheduler registers no such worker, the worker answers no such ping) and says so once in its log.
"""
import hashlib

from google.protobuf import descriptor_pb2

from proto import pb

# The sockets of each end (scheduler/wire.py, worker/wire.py): change it with them.
SOCKETS = "steps and pings: scheduler ROUTER <- worker DEALER; results and hellos: scheduler PULL <- worker PUSH"

def _message_lines(message, seen: set) -> list:
    """Canonical lines of `message` (a Descriptor) and of every message and enum its fields reach, each once."""
    if message.full_name in seen:
        return []
    seen.add(message.full_name)
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    lines = [f"message {message.full_name}"]
    lines += [f"  {f.name} = {f.number} {f.label} {f.type} {f.type_name}" for f in proto.field]
    for field in message.fields:
        if field.message_type is not None:
            lines += _message_lines(field.message_type, seen)
        elif field.enum_type is not None and field.enum_type.full_name not in seen:
            seen.add(field.enum_type.full_name)
            lines.append(f"enum {field.enum_type.full_name}")
            lines += [f"  {value.name} = {value.number}" for value in field.enum_type.values]
    return lines


def wire_version() -> str:
    """The digest (16 hex digits) of SOCKETS and of the messages a pb.WorkerMessage carries."""
    text = "\n".join([f"sockets {SOCKETS}"] + _message_lines(pb.WorkerMessage.DESCRIPTOR, set()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


WIRE_VERSION = wire_version()
