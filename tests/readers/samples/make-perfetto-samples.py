#!/usr/bin/env python3
"""Regenerate the Perfetto sample traces in this folder with the protos the `perfetto`
PyPI package ships (the same ones perfetto-decode.py reads them with).

usage: tests/readers/.venv/bin/python tests/readers/samples/make-perfetto-samples.py

  perfetto-valid.pftrace          process + 2 thread tracks + 1 counter track; nested
                                  slices, an instant, counters; one sequence uses interned
                                  names and track_event_defaults -> must decode ok
  perfetto-corrupt-truncated.pftrace  the valid trace cut in the middle of a packet
                                  -> decode error (exit 2)
  perfetto-unknown-field.pftrace  valid trace plus a TrackEvent field number 999 that the
                                  proto does not define -> unknown_fields, exit 1
  perfetto-unbalanced.pftrace     a SLICE_BEGIN without SLICE_END and a SLICE_END without
                                  SLICE_BEGIN -> exit 1
"""

import os

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
TE = pb.TrackEvent
SEQ = 1  # trusted_packet_sequence_id of the writer
SEQ2 = 2

PROCESS_UUID = 100
MAIN_UUID = 101
WORKER_UUID = 102
HEAP_UUID = 103


def descriptor(trace, uuid, **kw):
    p = trace.packet.add()
    p.trusted_packet_sequence_id = SEQ
    td = p.track_descriptor
    td.uuid = uuid
    if "parent" in kw:
        td.parent_uuid = kw["parent"]
    if "name" in kw:
        td.name = kw["name"]
    if "process" in kw:
        td.process.pid, td.process.process_name = kw["process"]
    if "thread" in kw:
        td.thread.pid, td.thread.tid, td.thread.thread_name = kw["thread"]
    if kw.get("counter"):
        td.counter.unit = pb.CounterDescriptor.UNIT_SIZE_BYTES
    return p


def event(trace, ts, etype, track=None, name=None, seq=SEQ, **kw):
    p = trace.packet.add()
    p.trusted_packet_sequence_id = seq
    p.timestamp = ts
    ev = p.track_event
    ev.type = etype
    if track is not None:
        ev.track_uuid = track
    if name is not None:
        ev.name = name
    if "name_iid" in kw:
        ev.name_iid = kw["name_iid"]
        p.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    if "value" in kw:
        ev.counter_value = kw["value"]
    return p


def valid_trace():
    t = pb.Trace()
    first = descriptor(t, PROCESS_UUID, process=(4242, "tickscope-sample"))
    first.first_packet_on_sequence = True
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    descriptor(t, MAIN_UUID, parent=PROCESS_UUID, thread=(4242, 4242, "main"))
    descriptor(t, WORKER_UUID, parent=PROCESS_UUID, thread=(4242, 4243, "worker-1"))
    descriptor(t, HEAP_UUID, parent=PROCESS_UUID, name="heap", counter=True)

    event(t, 1_000, TE.TYPE_SLICE_BEGIN, MAIN_UUID, "main")
    event(t, 1_000, TE.TYPE_COUNTER, HEAP_UUID, value=1024)
    event(t, 2_000, TE.TYPE_SLICE_BEGIN, MAIN_UUID, "parse_args")
    event(t, 3_000, TE.TYPE_SLICE_END, MAIN_UUID)
    event(t, 4_000, TE.TYPE_SLICE_BEGIN, MAIN_UUID, "run_workload")
    event(t, 5_000, TE.TYPE_INSTANT, MAIN_UUID, "checkpoint")
    event(t, 6_000, TE.TYPE_COUNTER, HEAP_UUID, value=4096)
    event(t, 9_000, TE.TYPE_SLICE_END, MAIN_UUID)
    event(t, 10_000, TE.TYPE_SLICE_END, MAIN_UUID)

    # Second sequence: the worker thread, written with interned names and a default track.
    p = t.packet.add()
    p.trusted_packet_sequence_id = SEQ2
    p.first_packet_on_sequence = True
    p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    p.trace_packet_defaults.track_event_defaults.track_uuid = WORKER_UUID
    p = t.packet.add()
    p.trusted_packet_sequence_id = SEQ2
    p.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    p.interned_data.event_names.add(iid=1, name="worker_loop")
    p.interned_data.event_names.add(iid=2, name="run_workload")
    event(t, 1_500, TE.TYPE_SLICE_BEGIN, seq=SEQ2, name_iid=1)
    event(t, 1_600, TE.TYPE_SLICE_BEGIN, seq=SEQ2, name_iid=2)
    event(t, 7_000, TE.TYPE_SLICE_END, seq=SEQ2)
    event(t, 8_000, TE.TYPE_SLICE_END, seq=SEQ2)
    return t


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"wrote {name} ({len(data)} bytes)")


def main():
    valid = valid_trace()
    data = valid.SerializeToString(deterministic=True)
    write("perfetto-valid.pftrace", data)

    write("perfetto-corrupt-truncated.pftrace", data[: len(data) * 2 // 3])

    # Field 999 (varint 7) appended to the first TrackEvent: tag = (999 << 3) | 0.
    bad = pb.Trace()
    bad.CopyFrom(valid)
    pkt = next(p for p in bad.packet if p.HasField("track_event"))
    pkt.track_event.MergeFromString(b"\xb8\x3e\x07")
    write("perfetto-unknown-field.pftrace", bad.SerializeToString(deterministic=True))

    t = pb.Trace()
    first = descriptor(t, MAIN_UUID, thread=(1, 1, "main"))
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    event(t, 1_000, TE.TYPE_SLICE_END, MAIN_UUID)  # end with no begin
    event(t, 2_000, TE.TYPE_SLICE_BEGIN, MAIN_UUID, "never_ended")
    write("perfetto-unbalanced.pftrace", t.SerializeToString(deterministic=True))


if __name__ == "__main__":
    main()
