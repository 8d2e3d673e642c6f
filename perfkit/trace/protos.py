"""Protobuf classes for XSpace (``*.xplane.pb``) and the few HloProto fields a trace needs, built at run
time from descriptors written here: no package ships generated ``xplane_pb2`` / ``hlo_pb2`` modules,
and xprof's bundled protos do not include xplane.proto.

Field numbers follow tsl/profiler/protobuf/xplane.proto and xla/service/hlo.proto (checked against
traces jax 0.10 writes on CPU and against a JAX 0.8 ROCm trace). ``XSPACE`` is the full schema (for
writing synthetic traces); its ``XPLANE`` and ``XLINE`` parse what ``perfkit.trace.xplane`` leaves to
protobuf: names, metadata, line headers, while the events are decoded with numpy by
``perfkit.trace.wire``. Unknown fields are kept by protobuf and ignored here.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_SCALARS = {
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}

# message -> [(field, number, type, oneof)]; a trailing "*" marks a repeated field, "map:V" a map<int64, V>.
_XPLANE = {
    "XSpace": [("planes", 1, "XPlane*", None), ("errors", 2, "string*", None), ("warnings", 3, "string*", None),
               ("hostnames", 4, "string*", None)],
    "XPlane": [("id", 1, "int64", None), ("name", 2, "string", None), ("lines", 3, "XLine*", None),
               ("event_metadata", 4, "map:XEventMetadata", None), ("stat_metadata", 5, "map:XStatMetadata", None),
               ("stats", 6, "XStat*", None)],
    "XLine": [("id", 1, "int64", None), ("display_id", 10, "int64", None), ("name", 2, "string", None),
              ("display_name", 11, "string", None), ("timestamp_ns", 3, "int64", None),
              ("duration_ps", 9, "int64", None), ("events", 4, "XEvent*", None)],
    "XEvent": [("metadata_id", 1, "int64", None), ("offset_ps", 2, "int64", "data"),
               ("num_occurrences", 5, "int64", "data"), ("duration_ps", 3, "int64", None),
               ("stats", 4, "XStat*", None)],
    "XStat": [("metadata_id", 1, "int64", None), ("double_value", 2, "double", "value"),
              ("uint64_value", 3, "uint64", "value"), ("int64_value", 4, "int64", "value"),
              ("str_value", 5, "string", "value"), ("bytes_value", 6, "bytes", "value"),
              ("ref_value", 7, "uint64", "value")],
    "XEventMetadata": [("id", 1, "int64", None), ("name", 2, "string", None), ("display_name", 4, "string", None),
                       ("metadata", 3, "bytes", None), ("stats", 5, "XStat*", None), ("child_id", 6, "int64*", None)],
    "XStatMetadata": [("id", 1, "int64", None), ("name", 2, "string", None), ("description", 3, "string", None)],
}

# The HloProto fields a trace reader needs: op name -> opcode, output shape, called computations, a collective's
# groups (xla_data.proto's ReplicaGroup, CollectiveDeviceListProto, IotaReplicaGroupListProto,
# MeshAxesReplicaGroupListProto; MeshProto's MeshAxis and AxisRefProto's SubAxis, nested there, stand alone here)
# and the module's device assignment.
_HLO = {
    "HloProto": [("hlo_module", 1, "HloModuleProto", None)],
    "HloModuleProto": [("name", 1, "string", None), ("computations", 3, "HloComputationProto*", None),
                       ("id", 5, "int64", None), ("device_assignment", 15, "DeviceAssignmentProto", None)],
    # (int32 counts and bools are varints, as int64 reads them)
    "DeviceAssignmentProto": [("replica_count", 1, "int64", None), ("computation_count", 2, "int64", None)],
    "HloComputationProto": [("name", 1, "string", None), ("instructions", 2, "HloInstructionProto*", None),
                            ("id", 5, "int64", None), ("root_id", 6, "int64", None)],
    "HloInstructionProto": [("name", 1, "string", None), ("opcode", 2, "string", None),
                            ("shape", 3, "ShapeProto", None), ("fusion_kind", 11, "string", None),
                            ("id", 35, "int64", None), ("operand_ids", 36, "int64*", None),
                            ("called_computation_ids", 38, "int64*", None), ("channel_id", 26, "int64", None),
                            ("replica_groups", 49, "ReplicaGroup*", None), ("use_global_device_ids", 71, "int64", None),
                            # newer XLA writes one of three (a oneof there), older ones the list's iota field
                            ("collective_device_list", 87, "CollectiveDeviceListProto", None),
                            ("iota_collective_device_list", 92, "IotaReplicaGroupListProto", None),
                            ("mesh_axes_replica_group_list", 93, "MeshAxesReplicaGroupListProto", None)],
    "ReplicaGroup": [("replica_ids", 1, "int64*", None)],
    "CollectiveDeviceListProto": [("replica_groups", 1, "ReplicaGroup*", None),
                                  ("iota_replica_group_list", 2, "IotaReplicaGroupListProto", None)],
    "IotaReplicaGroupListProto": [("num_replica_groups", 1, "int64", None),
                                  ("num_devices_per_group", 2, "int64", None)],
    "MeshAxesReplicaGroupListProto": [("mesh", 1, "MeshProto", None), ("axes", 2, "AxisRefProto*", None)],
    "MeshProto": [("axes", 1, "MeshAxis*", None)],
    "MeshAxis": [("name", 1, "string", None), ("size", 2, "int64", None)],
    "AxisRefProto": [("mesh_axis_index", 1, "int64", None), ("sub_axis_info", 2, "SubAxis", None)],
    "SubAxis": [("pre_size", 1, "int64", None), ("size", 2, "int64", None)],
    "ShapeProto": [("element_type", 2, "int64", None), ("dimensions", 3, "int64*", None),
                   ("tuple_shapes", 4, "ShapeProto*", None)],
}


def _build(package: str, messages: dict[str, list], root: str):
    """The message class ``root`` of a proto3 file holding ``messages``, in a pool of its own."""
    f = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name=f"perfkit/{package}.proto", package=package, syntax="proto3")
    for name, fields in messages.items():
        msg = fd.message_type.add(name=name)
        oneofs: list[str] = []
        for fname, number, typ, oneof in fields:
            field = msg.field.add(name=fname, number=number, label=f.LABEL_OPTIONAL)
            if typ.startswith("map:"):  # map<int64, V> is a repeated nested entry message
                entry = msg.nested_type.add(name=fname.title().replace("_", "") + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=f.TYPE_MESSAGE, label=f.LABEL_OPTIONAL,
                                type_name=f".{package}.{typ[4:]}")
                field.label, field.type, field.type_name = f.LABEL_REPEATED, f.TYPE_MESSAGE, f".{package}.{name}.{entry.name}"
                continue
            if typ.endswith("*"):
                field.label, typ = f.LABEL_REPEATED, typ[:-1]
            if typ in _SCALARS:
                field.type = _SCALARS[typ]
            else:
                field.type, field.type_name = f.TYPE_MESSAGE, f".{package}.{typ}"
            if oneof is not None:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    msg.oneof_decl.add(name=oneof)
                field.oneof_index = oneofs.index(oneof)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{root}"))


XSPACE = _build("tensorflow.profiler", _XPLANE, "XSpace")
XPLANE = message_factory.GetMessageClass(XSPACE.DESCRIPTOR.fields_by_name["planes"].message_type)
XLINE = message_factory.GetMessageClass(XPLANE.DESCRIPTOR.fields_by_name["lines"].message_type)
HLO_PROTO = _build("xla", _HLO, "HloProto")

# xla.PrimitiveType numbers -> the names HLO text prints.
PRIMITIVE_TYPES = {
    1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64", 10: "f16",
    11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64", 16: "bf16", 17: "token", 18: "c128",
    19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz",
    26: "s2", 27: "u2", 28: "f8e4m3", 29: "f8e3m4", 30: "f4e2m1fn", 31: "f8e8m0fnu",
}
