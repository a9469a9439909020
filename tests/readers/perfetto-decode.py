#!/usr/bin/env python3
"""Decode a Perfetto protobuf trace with Perfetto's own published protos and check it.

usage: tests/readers/.venv/bin/python tests/readers/perfetto-decode.py [--no-events] FILE

The protos are the ones the `perfetto` PyPI package ships, already compiled:
perfetto/protos/perfetto/trace/perfetto_trace_pb2.py (generated from Perfetto's merged
protos/perfetto/trace/perfetto_trace.proto, package `perfetto.protos`). No network, no
trace_processor: only `protobuf` decodes the file as a `perfetto.protos.Trace`.

Prints one JSON object on stdout (see README.md for the shape) and exits
  0  the trace decoded and every check passed,
  1  it decoded but a check failed (unknown fields, unbalanced slices, ...),
  2  it could not be read or decoded at all, or bad usage.

Checks:
  * decoding as perfetto.protos.Trace succeeds (a gzip-compressed file is unpacked first,
    and packets in TracePacket.compressed_packets are inflated and checked as if in place);
  * no decoded message anywhere carries unknown fields: an unknown field means the writer
    used a field number (or wire type) that the proto does not define;
  * every TrackEvent names a track (track_uuid, or track_event_defaults on its sequence)
    that has a TrackDescriptor, and every parent_uuid names a described track;
  * a uuid is never described twice with different content;
  * COUNTER events only on counter tracks (TrackDescriptor.counter set) and carrying a
    value; slices and instants only on non-counter tracks;
  * per track, its events in time order across sequences (as trace_processor sorts them:
    an async track's slices begin on one thread's sequence and end on another's):
    SLICE_BEGIN/SLICE_END balanced, no SLICE_END without an open slice, no SLICE_END
    before its SLICE_BEGIN; per sequence (trusted_packet_sequence_id), and per
    track within a sequence: timestamps never decrease (trace_processor sorts across
    sequences); every TrackEvent packet has a timestamp; timestamps on
    a sequence-scoped clock (TracePacketDefaults.timestamp_clock_id 64..127) are converted
    through that sequence's ClockSnapshot, adding up the deltas of an incremental clock;
  * a PerfSample's callstack_iid resolves on its sequence to interned frames, each with an
    interned function name and mapping;
  * interned names (name_iid / category_iids) resolve on their sequence, and packets with
    SEQ_NEEDS_INCREMENTAL_STATE come after a SEQ_INCREMENTAL_STATE_CLEARED on their
    sequence (trace processor drops them otherwise).
"""

import gzip
import zlib
import json
import sys
import warnings


def emit(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def fail_early(path, error, code=2):
    emit({"file": path, "ok": False, "error": error, "errors": [error], "packets": None,
          "track_events": None, "sequences": [], "clock_ids": [], "unknown_fields": [],
          "balanced": None, "tracks": []}, code)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 1 or any(f not in ("--no-events",) for f in flags):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        sys.exit(2)
    path = args[0]
    with_events = "--no-events" not in flags

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from google.protobuf.message import DecodeError
            from google.protobuf.unknown_fields import UnknownFieldSet
            from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except Exception as e:  # noqa: BLE001 - report any import problem as JSON
        fail_early(path, f"cannot import perfetto protos (run tests/readers/install.sh): {e}")

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail_early(path, f"cannot read {path}: {e}")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except Exception as e:  # noqa: BLE001
            fail_early(path, f"cannot gunzip {path}: {e}")

    trace = pb.Trace()
    try:
        trace.ParseFromString(data)
    except DecodeError as e:
        fail_early(path, f"decode error: not a valid perfetto.protos.Trace: {e}")
    except Exception as e:  # noqa: BLE001
        fail_early(path, f"decode error: {type(e).__name__}: {e}")

    errors = []
    # Packets deflated into TracePacket.compressed_packets (zlib, as Perfetto's tracing
    # service writes them with compression_type DEFLATE) are unpacked in place.
    packets = []
    inflated = []
    compressed = 0
    for pkt in trace.packet:
        if pkt.HasField("compressed_packets"):
            compressed += 1
            inner = pb.Trace()
            try:
                inner.ParseFromString(zlib.decompress(pkt.compressed_packets))
            except Exception as e:  # noqa: BLE001
                fail_early(path, f"compressed_packets #{compressed}: cannot inflate or decode: {e}")
            packets.extend(inner.packet)
            inflated.extend(inner.packet)
        else:
            packets.append(pkt)

    def err(msg):
        if len(errors) < 200:
            errors.append(msg)
        elif len(errors) == 200:
            errors.append("... (more errors left out)")

    # ---- unknown fields, anywhere in the tree -------------------------------------------
    unknown = []
    wire_names = {0: "varint", 1: "fixed64", 2: "length-delimited", 3: "start-group",
                  4: "end-group", 5: "fixed32"}

    def walk(msg, where):
        try:
            ufs = UnknownFieldSet(msg)
            for uf in ufs:
                unknown.append(f"{where}: field {uf.field_number} "
                               f"({wire_names.get(uf.wire_type, uf.wire_type)}) "
                               f"unknown in {msg.DESCRIPTOR.full_name}")
        except Exception as e:  # noqa: BLE001
            unknown.append(f"{where}: cannot list unknown fields: {e}")
        for fd, value in msg.ListFields():
            if fd.message_type is None:
                continue
            if fd.message_type.GetOptions().map_entry:
                if fd.message_type.fields_by_name["value"].message_type is not None:
                    for k, v in value.items():
                        walk(v, f"{where}.{fd.name}[{k!r}]")
            elif fd.is_repeated:
                for i, v in enumerate(value):
                    walk(v, f"{where}.{fd.name}[{i}]")
            else:
                walk(value, f"{where}.{fd.name}")

    if not packets:
        err("trace has no packets")
    walk(trace, "trace")
    for i, pkt in enumerate(inflated):
        walk(pkt, f"compressed packet[{i}]")
    for u in unknown[:200]:
        err(f"unknown field: {u}")

    # ---- track descriptors ----------------------------------------------------------------
    TE = pb.TrackEvent
    type_names = {v.number: v.name[len("TYPE_"):] for v in TE.Type.DESCRIPTOR.values}
    tracks = {}  # uuid -> dict
    desc_bytes = {}

    def track_name(td):
        for field in ("name", "static_name", "atrace_name"):
            if td.HasField(field):
                return getattr(td, field)
        return None

    track_events = {}

    def pair(t, uuid, stack, ts, i, etype, name, where):
        if etype == "SLICE_BEGIN":
            if name is None:
                err(f"{where}: SLICE_BEGIN without a name")
            stack.append((name, ts, len(stack), i))
            t["max_depth"] = max(t["max_depth"], len(stack))
            if name not in t["slice_names"]:
                t["slice_names"].append(name)
        elif etype == "SLICE_END":
            if not stack:
                err(f"{where}: SLICE_END on track {uuid} with no open slice")
                return
            bname, bts, depth, _ = stack.pop()
            if ts < bts:
                err(f"{where}: SLICE_END at {ts} before its SLICE_BEGIN {bname!r} at {bts}")
            if with_events:
                t["slices"].append({"name": bname, "ts": bts, "dur": ts - bts, "depth": depth})
        elif etype == "INSTANT":
            if name not in t["instant_names"]:
                t["instant_names"].append(name)
            if with_events:
                t["instants"].append({"name": name, "ts": ts, "depth": len(stack)})


    for i, pkt in enumerate(packets):
        if not pkt.HasField("track_descriptor"):
            continue
        td = pkt.track_descriptor
        if not td.HasField("uuid"):
            err(f"packet[{i}]: track_descriptor without uuid")
            continue
        raw = td.SerializeToString(deterministic=True)
        if td.uuid in desc_bytes:
            if desc_bytes[td.uuid] != raw:
                err(f"packet[{i}]: track uuid {td.uuid} described again with different content")
            continue
        desc_bytes[td.uuid] = raw
        t = {
            "uuid": td.uuid,
            "name": track_name(td),
            "parent_uuid": td.parent_uuid if td.HasField("parent_uuid") else None,
            "process": None,
            "thread": None,
            "counter": td.HasField("counter"),
            "counter_unit": None,
            "events": {name: 0 for name in type_names.values() if name != "UNSPECIFIED"},
            "slice_names": [],
            "instant_names": [],
            "max_depth": 0,
            "open_slices": 0,
        }
        if td.HasField("process"):
            t["process"] = {"pid": td.process.pid if td.process.HasField("pid") else None,
                            "name": td.process.process_name
                            if td.process.HasField("process_name") else None}
        if td.HasField("thread"):
            th = td.thread
            t["thread"] = {"pid": th.pid if th.HasField("pid") else None,
                           "tid": th.tid if th.HasField("tid") else None,
                           "name": th.thread_name if th.HasField("thread_name") else None}
        if td.HasField("counter"):
            c = td.counter
            if c.HasField("unit_name"):
                t["counter_unit"] = c.unit_name
            elif c.HasField("unit"):
                t["counter_unit"] = pb.CounterDescriptor.Unit.Name(c.unit)
        if with_events:
            t["slices"] = []
            t["instants"] = []
            t["counter_values"] = []
        tracks[td.uuid] = t
    for t in tracks.values():
        if t["parent_uuid"] is not None and t["parent_uuid"] not in tracks:
            err(f"track {t['uuid']}: parent_uuid {t['parent_uuid']} has no track descriptor")

    # ---- events -------------------------------------------------------------------------
    SEQ_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    SEQ_NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    seqs = {}  # seq id -> state
    stacks = {}  # uuid -> [(name, ts, depth)]
    last_ts_track = {}
    clock_ids = set()
    event_count = 0
    perf_samples = 0
    sample_leaves = {}
    sample_functions = {}
    sample_tids = {}

    for i, pkt in enumerate(packets):
        sid = pkt.trusted_packet_sequence_id
        s = seqs.setdefault(sid, {"valid": False, "names": {}, "cats": {}, "default_track": None,
                                  "default_clock": None, "clocks": {}, "last_ts": None,
                                  "packets": 0, "funcs": {}, "frames": {}, "callstacks": {},
                                  "mappings": set()})
        s["packets"] += 1
        if pkt.incremental_state_cleared or (pkt.sequence_flags & SEQ_CLEARED):
            s["valid"] = True
            s["names"], s["cats"], s["default_track"] = {}, {}, None
            s["default_clock"], s["clocks"] = None, {}
            s["funcs"], s["frames"], s["callstacks"], s["mappings"] = {}, {}, {}, set()
        if pkt.HasField("clock_snapshot"):
            # Sequence-scoped clocks (ids 64..127) against BOOTTIME (6), the default clock;
            # an incremental one's packets carry the ns since the previous packet on it.
            cs = pkt.clock_snapshot.clocks
            boot = [c.timestamp for c in cs if c.clock_id == 6]
            for c in cs:
                if 64 <= c.clock_id <= 127:
                    if not boot:
                        err(f"packet[{i}]: clock snapshot of clock {c.clock_id} without BOOTTIME")
                        continue
                    s["clocks"][c.clock_id] = {"base": c.timestamp, "boot": boot[0],
                                               "value": c.timestamp,
                                               "incremental": c.is_incremental}
        if (pkt.sequence_flags & SEQ_NEEDS) and not s["valid"]:
            err(f"packet[{i}]: SEQ_NEEDS_INCREMENTAL_STATE on sequence {sid} before any "
                f"SEQ_INCREMENTAL_STATE_CLEARED (trace processor drops such packets)")
        if pkt.HasField("interned_data"):
            for en in pkt.interned_data.event_names:
                s["names"][en.iid] = en.name
            for ec in pkt.interned_data.event_categories:
                s["cats"][ec.iid] = ec.name
            for fn in pkt.interned_data.function_names:
                s["funcs"][fn.iid] = fn.str.decode("utf-8", "replace")
            for m in pkt.interned_data.mappings:
                s["mappings"].add(m.iid)
            for fr in pkt.interned_data.frames:
                s["frames"][fr.iid] = fr
            for cs in pkt.interned_data.callstacks:
                s["callstacks"][cs.iid] = list(cs.frame_ids)
        clock = None
        if pkt.HasField("timestamp_clock_id"):
            clock = pkt.timestamp_clock_id
        elif s["default_clock"] is not None:
            clock = s["default_clock"]
        if pkt.HasField("trace_packet_defaults"):
            d = pkt.trace_packet_defaults
            if d.HasField("track_event_defaults") and d.track_event_defaults.HasField("track_uuid"):
                s["default_track"] = d.track_event_defaults.track_uuid
            if d.HasField("timestamp_clock_id"):
                s["default_clock"] = d.timestamp_clock_id
        if clock is not None:
            clock_ids.add(clock)
        ts = pkt.timestamp
        if pkt.HasField("timestamp") and clock is not None and 64 <= clock <= 127:
            c = s["clocks"].get(clock)
            if c is None:
                err(f"packet[{i}]: timestamp on clock {clock}, which no snapshot on "
                    f"sequence {sid} defines")
            else:
                value = c["value"] + pkt.timestamp if c["incremental"] else pkt.timestamp
                c["value"] = value
                ts = value - c["base"] + c["boot"]
        if pkt.HasField("timestamp"):
            if s["last_ts"] is not None and ts < s["last_ts"]:
                err(f"packet[{i}]: timestamp {ts} < previous {s['last_ts']} "
                    f"on sequence {sid}")
            s["last_ts"] = ts

        if pkt.HasField("perf_sample"):
            ps = pkt.perf_sample
            where = f"packet[{i}] perf_sample"
            perf_samples += 1
            if not pkt.HasField("timestamp"):
                err(f"{where}: packet has no timestamp")
            if not (pkt.sequence_flags & SEQ_NEEDS):
                err(f"{where}: interned callstack without SEQ_NEEDS_INCREMENTAL_STATE")
            cs = s["callstacks"].get(ps.callstack_iid)
            if cs is None:
                err(f"{where}: callstack_iid {ps.callstack_iid} not interned on sequence {sid}")
                continue
            names = []
            for fid in cs:
                fr = s["frames"].get(fid)
                if fr is None:
                    err(f"{where}: frame {fid} not interned on sequence {sid}")
                    continue
                if fr.mapping_id not in s["mappings"]:
                    err(f"{where}: frame {fid}'s mapping {fr.mapping_id} not interned")
                name = s["funcs"].get(fr.function_name_id)
                if name is None:
                    err(f"{where}: function name {fr.function_name_id} not interned")
                names.append(name)
            if names:
                leaf = names[-1]
                sample_leaves[leaf] = sample_leaves.get(leaf, 0) + 1
                for n in set(names):
                    sample_functions[n] = sample_functions.get(n, 0) + 1
            sample_tids[ps.tid] = sample_tids.get(ps.tid, 0) + 1
            continue
        if not pkt.HasField("track_event"):
            continue
        event_count += 1
        ev = pkt.track_event
        where = f"packet[{i}] track_event"
        if not pkt.HasField("timestamp"):
            err(f"{where}: packet has no timestamp")
        if ev.HasField("track_uuid"):
            uuid = ev.track_uuid
        elif s["default_track"] is not None:
            uuid = s["default_track"]
        else:
            err(f"{where}: no track_uuid and no track_event_defaults on sequence {sid}")
            continue
        t = tracks.get(uuid)
        if t is None:
            err(f"{where}: track_uuid {uuid} has no track descriptor")
            continue
        etype = type_names.get(ev.type, str(ev.type))
        if etype == "UNSPECIFIED":
            err(f"{where}: type unset (TYPE_UNSPECIFIED)")
            continue
        t["events"][etype] = t["events"].get(etype, 0) + 1

        name = None
        if ev.HasField("name"):
            name = ev.name
        elif ev.HasField("name_iid"):
            name = s["names"].get(ev.name_iid)
            if name is None:
                err(f"{where}: name_iid {ev.name_iid} not interned on sequence {sid}")
        for ci in ev.category_iids:
            if ci not in s["cats"]:
                err(f"{where}: category iid {ci} not interned on sequence {sid}")

        # trace_processor sorts packets across sequences; within one, file order is time order.
        prev = last_ts_track.get((uuid, sid))
        if prev is not None and ts < prev:
            err(f"{where}: timestamp {ts} < previous {prev} on track {uuid}, sequence {sid}")
        last_ts_track[(uuid, sid)] = ts

        if etype == "COUNTER":
            if not t["counter"]:
                err(f"{where}: COUNTER event on non-counter track {uuid}")
            if ev.HasField("counter_value"):
                value = ev.counter_value
            elif ev.HasField("double_counter_value"):
                value = ev.double_counter_value
            else:
                value = None
                err(f"{where}: COUNTER event without counter_value/double_counter_value")
            if with_events:
                t["counter_values"].append({"ts": ts, "value": value})
            continue
        if t["counter"]:
            err(f"{where}: {etype} event on counter track {uuid}")
        # Slices and instants are paired after the last packet, in each track's time order,
        # as trace_processor sorts them: a track's events may come from several sequences
        # (an async track whose slices begin on one thread and end on another).
        track_events.setdefault(uuid, []).append((ts, i, etype, name, where))

    for uuid, evs in track_events.items():
        t = tracks[uuid]
        stack = stacks.setdefault(uuid, [])
        evs.sort(key=lambda e: (e[0], e[1]))
        for ts, i, etype, name, where in evs:
            pair(t, uuid, stack, ts, i, etype, name, where)

    balanced = True
    for uuid, stack in stacks.items():
        if stack:
            balanced = False
            tracks[uuid]["open_slices"] = len(stack)
            for name, bts, _, pi in stack:
                err(f"packet[{pi}]: slice {name!r} begun at {bts} on track {uuid} never ended")
    if with_events:
        for t in tracks.values():
            t["slices"].sort(key=lambda x: (x["ts"], x["depth"]))

    result = {
        "file": path,
        "ok": not errors,
        "error": "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        if errors else None,
        "errors": errors,
        "packets": len(packets),
        "perf_samples": perf_samples,
        # Per function: the samples whose callstack holds it (root first in the trace).
        "sample_functions": dict(sorted(sample_functions.items(), key=lambda kv: -kv[1])[:50]),
        "sample_leaves": dict(sorted(sample_leaves.items(), key=lambda kv: -kv[1])[:20]),
        "sample_tids": {str(k): v for k, v in sorted(sample_tids.items())},
        "compressed_packets": compressed,
        "track_events": event_count,
        "sequences": sorted(seqs),
        "clock_ids": sorted(clock_ids),
        "unknown_fields": unknown,
        "balanced": balanced,
        "tracks": list(tracks.values()),
    }
    emit(result, 0 if not errors else 1)


if __name__ == "__main__":
    main(sys.argv)
