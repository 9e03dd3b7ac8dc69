"""Reads a ddprun event file with torch's own event classes (torch.distributed.elastic.events):
every line must deserialize and serialize back to the same bytes. Prints one line per event:
name, source, global rank, state, agent_restarts, round, exit code (from the inner metadata),
whether raw_error is set, and ddprun's root_cause when it is.
Usage: python3 check_events.py FILE"""
import json
import sys

from torch.distributed.elastic.events.api import Event, EventSource

for number, line in enumerate(open(sys.argv[1], encoding="ascii"), 1):
    line = line.rstrip("\n")
    event = Event.deserialize(line)
    if event.serialize() != line:
        sys.exit(f"line {number} does not serialize back the same:\n{line}\n{event.serialize()}")
    assert isinstance(event.source, EventSource)
    md = event.metadata
    inner = json.loads(md["metadata"])
    print(event.name, event.source.value, md["global_rank"], md["state"], md["agent_restarts"],
          md["round"], inner.get("exit_code", ["-"])[0], md["raw_error"] is not None,
          *([md["root_cause"]] if md.get("root_cause") else []))
