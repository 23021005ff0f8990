"""GGUF bytes for the bad-input tests: a writer for hand-made (hostile) files and a walker that
finds where a real file keeps its counts, lengths and tensor fields (docs/gguf.md of ggml)."""
import struct

STRING, ARRAY, U32 = 8, 9, 4
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def string(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(s)) + s


def header(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv_string(key, value):
    return string(key) + struct.pack("<I", STRING) + string(value)


def kv_u32(key, value):
    return string(key) + struct.pack("<II", U32, value)


def tensor_info(name, dims, ggml_type=0, offset=0):
    return (string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) +
            struct.pack("<IQ", ggml_type, offset))


def _skip_value(data, pos, vtype):
    if vtype == STRING:
        return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
    if vtype == ARRAY:
        elem, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if elem in _SCALAR_SIZES:
            return pos + count * _SCALAR_SIZES[elem]
        for _ in range(count):
            pos = _skip_value(data, pos, elem)
        return pos
    return pos + _SCALAR_SIZES[vtype]


def field_offsets(data):
    """Offsets in a well-formed GGUF file: the counts, the first key's length and the first
    tensor info's name length, n_dims, first dimension, type and offset."""
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    pos = 24
    for _ in range(n_kv):
        pos += 8 + struct.unpack_from("<Q", data, pos)[0]
        vtype = struct.unpack_from("<I", data, pos)[0]
        pos = _skip_value(data, pos + 4, vtype)
    name_len = struct.unpack_from("<Q", data, pos)[0]
    n_dims_at = pos + 8 + name_len
    n_dims = struct.unpack_from("<I", data, n_dims_at)[0]
    type_at = n_dims_at + 4 + 8 * n_dims
    assert n_tensors > 0
    return {"tensor_count": 8, "kv_count": 16, "first_key_length": 24,
            "tensor_name_length": pos, "tensor_n_dims": n_dims_at,
            "tensor_dim0": n_dims_at + 4, "tensor_type": type_at, "tensor_offset": type_at + 4}
